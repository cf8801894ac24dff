package session

// Finding sandboxes: a team's records and any record for the sandbox plane
// (admission.go admits calls into a running one).

import (
	"context"
	"fmt"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
	"github.com/warrenhq/warren/internal/store"
)

// Get returns a team's sandbox. Another team's sandbox is "not found".
func (r *registry) Get(ctx context.Context, team, id string) (store.Sandbox, error) {
	if err := ids.Validate("sandbox id", id); err != nil {
		return store.Sandbox{}, err
	}
	rec, err := r.store.GetSandbox(ctx, id)
	if err != nil {
		return store.Sandbox{}, err
	}
	if rec.Team != team || rec.State == StateDestroyed {
		return store.Sandbox{}, fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	return rec, nil
}

// Lookup returns a sandbox's record whatever its team, for the sandbox
// plane: its callers prove themselves with the sandbox's own access token,
// which the caller must check before acting on the record.
func (r *registry) Lookup(ctx context.Context, id string) (store.Sandbox, error) {
	if err := ids.Validate("sandbox id", id); err != nil {
		return store.Sandbox{}, err
	}
	rec, err := r.store.GetSandbox(ctx, id)
	if err != nil {
		return store.Sandbox{}, err
	}
	if rec.State == StateDestroyed {
		return store.Sandbox{}, fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	return rec, nil
}

// Attached lists the sandboxes this daemon runs, running or paused.
func (r *registry) Attached() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.live))
	for id := range r.live {
		out = append(out, id)
	}
	return out
}

// List returns a team's sandboxes.
func (r *registry) List(ctx context.Context, team string, f store.SandboxFilter) ([]store.Sandbox, error) {
	f.Team = team
	if len(f.States) == 0 {
		f.States = []store.SandboxState{StateCreating, StateRunning, StatePaused, StateHibernated, StateStopped, StateFailed}
	}
	return r.store.ListSandboxes(ctx, f)
}
