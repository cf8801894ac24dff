package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
)

// validateLineage checks a sandbox's lineage fields (Family already
// defaulted).
func validateLineage(sb Sandbox) error {
	if err := ids.Validate("family", sb.Family); err != nil {
		return fmt.Errorf("sandbox %s: %w", sb.ID, err)
	}
	for _, f := range []struct{ what, v string }{
		{"forked-from snapshot id", sb.ForkedFrom},
		{"parent sandbox id", sb.ParentSandbox},
		{"head snapshot id", sb.Head},
	} {
		if f.v == "" {
			continue
		}
		if err := ids.Validate(f.what, f.v); err != nil {
			return fmt.Errorf("sandbox %s: %w", sb.ID, err)
		}
	}
	if sb.Turn < 0 || sb.QuotaBytes < 0 {
		return fmt.Errorf("sandbox %s: turn and disk quota must not be negative: %w", sb.ID, errdefs.ErrInvalid)
	}
	return nil
}

// SetSandboxHead records the snapshot the sandbox's live tree now descends
// from (after a turn snapshot or a rollback); "" means its origin.
func (s *sandboxTable) SetSandboxHead(ctx context.Context, id, head string) error {
	return setSandboxHead(ctx, s.w, id, head)
}

func setSandboxHead(ctx context.Context, ex execer, id, head string) error {
	if head != "" {
		if err := ids.Validate("head snapshot id", head); err != nil {
			return fmt.Errorf("sandbox %s: %w", id, err)
		}
	}
	res, err := ex.ExecContext(ctx, `UPDATE sandboxes SET head = ?, updated_at = ? WHERE id = ?`,
		head, toNanos(time.Now()), id)
	return oneRow(res, err, "set head of sandbox", id)
}

// NextTurn advances the sandbox's turn counter and returns the new turn
// number. One UPDATE ... RETURNING on the one writer connection, so racing
// callers each get a different number and none is skipped.
func (s *sandboxTable) NextTurn(ctx context.Context, sandboxID string) (int, error) {
	var turn int
	err := s.w.QueryRowContext(ctx, `UPDATE sandboxes SET turn = turn + 1, updated_at = ?
		WHERE id = ? RETURNING turn`, toNanos(time.Now()), sandboxID).Scan(&turn)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("sandbox %s: %w", sandboxID, errdefs.ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("next turn of sandbox %s: %w", sandboxID, dbErr(err))
	}
	return turn, nil
}

// CountForksOf counts the sandboxes, destroyed ones aside, made from the
// snapshot, so that deleting a snapshot can tell whether anything live was
// made from it.
func (s *sandboxTable) CountForksOf(ctx context.Context, snapshotID string) (int, error) {
	var n int
	err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM sandboxes WHERE forked_from = ? AND state != ?`,
		snapshotID, string(StateDestroyed)).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count forks of snapshot %s: %w", snapshotID, dbErr(err))
	}
	return n, nil
}
