package store

import (
	"context"

	"github.com/warrenhq/warren/internal/ids"
)

// listHistory reads a sandbox's rows of an append-only history table
// (events, tool calls, network events) after the row with id after (0 =
// from the oldest), oldest first, at most limit (0 = all). cols are
// selected in order and handed to scan; what names the rows in errors.
func listHistory[T any](ctx context.Context, s *conns, table, cols, what, sandboxID string, after int64, limit int, scan func(scanner) (T, error)) ([]T, error) {
	if err := ids.Validate("sandbox id", sandboxID); err != nil {
		return nil, err
	}
	q := `SELECT ` + cols + ` FROM ` + table + ` WHERE sandbox_id = ? AND id > ? ORDER BY id`
	args := []any{sandboxID, after}
	if limit > 0 {
		q += ` LIMIT ?`
		args = append(args, limit)
	}
	return queryAll(ctx, s.r, "list "+what+" of "+sandboxID, scan, q, args...)
}
