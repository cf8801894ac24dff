package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/warrenhq/warren/internal/errdefs"
)

// listQuery is one filtered, paged listing of a table ordered by
// (created_at, id): sandboxes and snapshots share it.
type listQuery struct {
	table, kind, cols string // kind names the rows in messages ("sandbox")
	where             []string
	args              []any
	after             string // an id or Cursor() to start after
	limit             int    // 0 = no limit
}

// runList runs q and scans every row with scan.
func runList[T any](ctx context.Context, s *Store, q listQuery, scan func(scanner) (T, error)) ([]T, error) {
	if q.after != "" {
		created, id, err := s.resolveCursor(ctx, q.table, q.kind, q.after)
		if err != nil {
			return nil, err
		}
		q.where = append(q.where, `(created_at, id) > (?, ?)`)
		q.args = append(q.args, created, id)
	}
	if q.limit < 0 {
		return nil, fmt.Errorf("list limit %d is negative: %w", q.limit, errdefs.ErrInvalid)
	}
	sql := `SELECT ` + q.cols + ` FROM ` + q.table
	if len(q.where) > 0 {
		sql += ` WHERE ` + strings.Join(q.where, ` AND `)
	}
	sql += ` ORDER BY created_at, id`
	if q.limit > 0 {
		sql += ` LIMIT ?`
		q.args = append(q.args, q.limit)
	}
	rows, err := s.r.QueryContext(ctx, sql, q.args...)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", q.table, dbErr(err))
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", q.table, dbErr(err))
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list %s: %w", q.table, dbErr(err))
	}
	return out, nil
}
