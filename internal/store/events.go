package store

import (
	"context"
	"fmt"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
)

// Event is one step of a sandbox's life: a state change (or a notable
// action that keeps the state, like a rollback) with its time and cause.
type Event struct {
	ID        int64
	SandboxID string
	Team      string
	At        time.Time
	// Kind names what happened: created, paused, resumed, rolled-back,
	// timed-out, failed, destroyed, reattached.
	Kind string
	From SandboxState
	To   SandboxState
	// Cause is who or what made it happen: api, timeout, error, restart,
	// pool.
	Cause  string
	Detail string
}

// maxEventDetail bounds an event's detail (error messages can be long).
const maxEventDetail = 2048

// AddEvent appends to a sandbox's history.
func (s *Store) AddEvent(ctx context.Context, e Event) error {
	if err := ids.Validate("sandbox id", e.SandboxID); err != nil {
		return err
	}
	if e.Kind == "" || e.Cause == "" {
		return fmt.Errorf("an event needs a kind and a cause: %w", errdefs.ErrInvalid)
	}
	if len(e.Detail) > maxEventDetail {
		e.Detail = e.Detail[:maxEventDetail]
	}
	if e.At.IsZero() {
		e.At = time.Now()
	}
	_, err := s.w.ExecContext(ctx, `INSERT INTO sandbox_events
		(sandbox_id, team, at, kind, from_state, to_state, cause, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		e.SandboxID, e.Team, toNanos(e.At), e.Kind, string(e.From), string(e.To), e.Cause, e.Detail)
	if err != nil {
		return fmt.Errorf("record event of %s: %w", e.SandboxID, dbErr(err))
	}
	return nil
}

// ListEvents returns a sandbox's events after the one with id after (0 =
// from the start), oldest first, at most limit (0 = all).
func (s *Store) ListEvents(ctx context.Context, sandboxID string, after int64, limit int) ([]Event, error) {
	if err := ids.Validate("sandbox id", sandboxID); err != nil {
		return nil, err
	}
	q := `SELECT id, sandbox_id, team, at, kind, from_state, to_state, cause, detail
		FROM sandbox_events WHERE sandbox_id = ? AND id > ? ORDER BY id`
	args := []any{sandboxID, after}
	if limit > 0 {
		q += ` LIMIT ?`
		args = append(args, limit)
	}
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list events of %s: %w", sandboxID, dbErr(err))
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		var e Event
		var at int64
		var from, to string
		if err := rows.Scan(&e.ID, &e.SandboxID, &e.Team, &at, &e.Kind, &from, &to, &e.Cause, &e.Detail); err != nil {
			return nil, fmt.Errorf("read event: %w", dbErr(err))
		}
		e.At, e.From, e.To = fromNanos(at), SandboxState(from), SandboxState(to)
		out = append(out, e)
	}
	return out, rows.Err()
}
