package session

import (
	"context"
	"fmt"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/store"
)

// history answers for what happened in a sandbox: its events and tool
// calls.
type history struct {
	*registry
	store historyStore
}

// Causes of lifecycle events.
const (
	CauseAPI     = "api"
	CauseTimeout = "timeout"
	CauseError   = "error"
	CauseRestart = "restart"
	CausePool    = "pool"
	// CauseMove: the sandbox moved between nodes of a fleet.
	CauseMove = "move"
	// CauseAutoResume: a call needed a paused sandbox created with
	// autoResume.
	CauseAutoResume = "auto-resume"
)

// Events returns a team's sandbox's history after event id `after`.
func (h *history) Events(ctx context.Context, team, id string, after int64, limit int) ([]store.Event, error) {
	if _, err := h.Get(ctx, team, id); err != nil {
		return nil, err
	}
	return h.store.ListEvents(ctx, id, after, limit)
}

// StoppedDuringCommand explains a command, begun at since, whose
// connection to the sandbox's agent broke: if the sandbox stopped running
// meanwhile (its timeout killed it, say), it returns an error saying how and
// why, ErrNotFound if the sandbox is gone and ErrConflict if it is paused,
// hibernated, stopped or failed; ErrConflict too if a forced rollback
// restarted its processes since. It returns nil while the sandbox runs
// undisturbed, and when that cannot be told: the break is then the agent's
// own and is reported as it is.
func (h *history) StoppedDuringCommand(ctx context.Context, team, id string, since time.Time) error {
	kind := errdefs.ErrConflict
	rec, err := h.store.GetSandbox(ctx, id)
	switch {
	case errdefs.IsNotFound(err) || err == nil && rec.State == StateDestroyed:
		kind = errdefs.ErrNotFound
	case err != nil || rec.Team != team:
		return nil
	case rec.State == StateRunning:
		h.mu.Lock()
		var at time.Time
		var to string
		if sb := h.live[id]; sb != nil {
			at, to = sb.restarted, sb.restartedTo
		}
		h.mu.Unlock()
		if at.IsZero() || at.Before(since) {
			return nil
		}
		return fmt.Errorf("sandbox %s was rolled back to snapshot %s while the command ran (forced), which restarted its processes, so the command did not finish: %w", id, to, errdefs.ErrConflict)
	}
	ev, err := h.store.LastEvent(ctx, id)
	if err != nil || ev.Team != team || ev.To == StateRunning {
		return nil
	}
	what := map[store.SandboxState]string{
		StateDestroyed:  "was killed",
		StatePaused:     "was paused",
		StateHibernated: "was hibernated (its processes saved to disk and ended)",
		StateStopped:    "was stopped",
		StateFailed:     "failed",
	}[ev.To]
	if what == "" {
		what = "became " + string(ev.To)
	}
	why := map[string]string{
		CauseTimeout: "its timeout ran out",
		CauseAPI:     "an API call asked for it",
		CauseRestart: "warren restarted",
	}[ev.Cause]
	if why == "" {
		why = ev.Cause
	}
	if ev.Detail != "" {
		why += ": " + ev.Detail
	}
	return fmt.Errorf("sandbox %s %s while the command ran (%s), so the command did not finish: %w", id, what, why, kind)
}
