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
func (s *historyTables) AddEvent(ctx context.Context, e Event) error {
	return insertEvent(ctx, s.w, e)
}

func insertEvent(ctx context.Context, ex execer, e Event) error {
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
	_, err := ex.ExecContext(ctx, `INSERT INTO sandbox_events
		(sandbox_id, team, at, kind, from_state, to_state, cause, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		e.SandboxID, e.Team, toNanos(e.At), e.Kind, string(e.From), string(e.To), e.Cause, e.Detail)
	if err != nil {
		return fmt.Errorf("record event of %s: %w", e.SandboxID, dbErr(err))
	}
	return nil
}

// ListEvents returns a sandbox's events after the one with id after (0 =
// from the start), oldest first, at most limit (0 = all).
func (s *historyTables) ListEvents(ctx context.Context, sandboxID string, after int64, limit int) ([]Event, error) {
	return listHistory(ctx, s.conns, "sandbox_events", eventCols, "events", sandboxID, after, limit, scanEvent)
}

const eventCols = "id, sandbox_id, team, at, kind, from_state, to_state, cause, detail"

func scanEvent(sc scanner) (Event, error) {
	var e Event
	var at int64
	var from, to string
	err := sc.Scan(&e.ID, &e.SandboxID, &e.Team, &at, &e.Kind, &from, &to, &e.Cause, &e.Detail)
	e.At, e.From, e.To = fromNanos(at), SandboxState(from), SandboxState(to)
	return e, err
}

// LastEvent returns a sandbox's newest event; ErrNotFound if it has none.
// Events outlive the sandbox's record.
func (s *historyTables) LastEvent(ctx context.Context, sandboxID string) (Event, error) {
	if err := ids.Validate("sandbox id", sandboxID); err != nil {
		return Event{}, err
	}
	e, err := scanEvent(s.r.QueryRowContext(ctx, `SELECT `+eventCols+`
		FROM sandbox_events WHERE sandbox_id = ? ORDER BY id DESC LIMIT 1`, sandboxID))
	if errors.Is(err, sql.ErrNoRows) {
		return Event{}, fmt.Errorf("events of sandbox %s: %w", sandboxID, errdefs.ErrNotFound)
	}
	if err != nil {
		return Event{}, fmt.Errorf("last event of %s: %w", sandboxID, dbErr(err))
	}
	return e, nil
}
