package session

import (
	"context"

	"github.com/warrenhq/warren/internal/store"
)

// Causes of lifecycle events.
const (
	CauseAPI     = "api"
	CauseTimeout = "timeout"
	CauseError   = "error"
	CauseRestart = "restart"
	CausePool    = "pool"
	// CauseAutoResume: a call needed a paused sandbox created with
	// autoResume.
	CauseAutoResume = "auto-resume"
)

// event records one step of a sandbox's life. It is best effort: a failed
// write is logged, never returned (the step itself happened).
func (m *Manager) event(ctx context.Context, rec store.Sandbox, kind string, from, to store.SandboxState, cause, detail string) {
	e := store.Event{SandboxID: rec.ID, Team: rec.Team, At: m.cfg.Now().UTC(), Kind: kind, From: from, To: to, Cause: cause, Detail: detail}
	if err := m.store.AddEvent(context.WithoutCancel(ctx), e); err != nil {
		m.log.Warn("record sandbox event", "sandbox", rec.ID, "kind", kind, "err", err)
	}
	if m.cfg.OnEvent != nil {
		m.cfg.OnEvent(e)
	}
}

// Events returns a team's sandbox's history after event id `after`.
func (m *Manager) Events(ctx context.Context, team, id string, after int64, limit int) ([]store.Event, error) {
	if _, err := m.Get(ctx, team, id); err != nil {
		return nil, err
	}
	return m.store.ListEvents(ctx, id, after, limit)
}
