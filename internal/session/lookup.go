package session

// Finding sandboxes: a team's records, any record for the sandbox plane,
// and the agent connection of a running sandbox.

import (
	"context"
	"fmt"

	"github.com/warrenhq/warren/internal/agentconn"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
	"github.com/warrenhq/warren/internal/store"
)

// Get returns a team's sandbox. Another team's sandbox is "not found".
func (m *Manager) Get(ctx context.Context, team, id string) (store.Sandbox, error) {
	if err := ids.Validate("sandbox id", id); err != nil {
		return store.Sandbox{}, err
	}
	rec, err := m.store.GetSandbox(ctx, id)
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
func (m *Manager) Lookup(ctx context.Context, id string) (store.Sandbox, error) {
	if err := ids.Validate("sandbox id", id); err != nil {
		return store.Sandbox{}, err
	}
	rec, err := m.store.GetSandbox(ctx, id)
	if err != nil {
		return store.Sandbox{}, err
	}
	if rec.State == StateDestroyed {
		return store.Sandbox{}, fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	return rec, nil
}

// Attached lists the sandboxes this daemon runs, running or paused.
func (m *Manager) Attached() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, 0, len(m.live))
	for id := range m.live {
		out = append(out, id)
	}
	return out
}

// List returns a team's sandboxes.
func (m *Manager) List(ctx context.Context, team string, f store.SandboxFilter) ([]store.Sandbox, error) {
	f.Team = team
	if len(f.States) == 0 {
		f.States = []store.SandboxState{StateCreating, StateRunning, StatePaused, StateHibernated, StateStopped, StateFailed}
	}
	return m.store.ListSandboxes(ctx, f)
}

// Agent returns the agent connection of a team's running sandbox.
func (m *Manager) Agent(ctx context.Context, team, id string) (*agentconn.Conn, error) {
	m.mu.Lock()
	if sb := m.live[id]; sb != nil && sb.team == team && !sb.paused && !sb.draining {
		sb.lastActive = m.cfg.Now()
		m.mu.Unlock()
		return sb.Agent, nil
	}
	m.mu.Unlock()
	// Not attached: the record says why (unknown, another team's, failed).
	rec, err := m.Get(ctx, team, id)
	if err != nil {
		return nil, err
	}
	if (rec.State == StatePaused || rec.State == StateHibernated) && rec.AutoResume {
		if _, err := m.resume(ctx, team, id, CauseAutoResume); err != nil {
			return nil, err
		}
		return m.Agent(ctx, team, id)
	}
	if rec.State == StatePaused || rec.State == StateHibernated {
		return nil, fmt.Errorf("sandbox %s is %s; resume it first (POST /sandboxes/%s/resume): %w", id, rec.State, id, errdefs.ErrConflict)
	}
	if rec.State != StateRunning {
		return nil, fmt.Errorf("sandbox %s is %s, not running: %w", id, rec.State, errdefs.ErrConflict)
	}
	m.mu.Lock()
	sb := m.live[id]
	m.mu.Unlock()
	if sb == nil {
		return nil, fmt.Errorf("sandbox %s is not attached to this daemon: %w", id, errdefs.ErrUnavailable)
	}
	if sb.draining {
		return nil, fmt.Errorf("sandbox %s is draining: it takes no new calls and stops when its commands finish: %w", id, errdefs.ErrConflict)
	}
	return sb.Agent, nil
}
