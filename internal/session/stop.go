package session

import (
	"context"
	"fmt"
	"time"

	"github.com/warrenhq/warren/internal/agentconn"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/store"
)

// MaxGrace bounds a graceful stop's grace period.
const MaxGrace = 5 * time.Minute

// Stop ends a team's sandbox's processes and keeps its filesystem (and its
// snapshots): the sandbox becomes stopped; deleting it frees the rest. With
// grace > 0 the processes get SIGTERM and grace to exit before SIGKILL.
func (m *Manager) Stop(ctx context.Context, team, id string, grace time.Duration) (store.Sandbox, bool, error) {
	if grace < 0 || grace > MaxGrace {
		return store.Sandbox{}, false, fmt.Errorf("grace must be 0..%s: %w", MaxGrace, errdefs.ErrInvalid)
	}
	unlock := m.lockSandbox(id)
	defer unlock()
	rec, err := m.Get(ctx, team, id)
	if err != nil {
		return store.Sandbox{}, false, err
	}
	if err := checkTransition(id, rec.State, StateStopped); err != nil {
		return store.Sandbox{}, false, err
	}
	m.mu.Lock()
	sb := m.live[id]
	delete(m.live, id) // nothing may use it, and the watch must not fail it
	m.mu.Unlock()
	var conn *agentconn.Conn
	if sb != nil {
		conn = sb.Agent
	}
	graceful, err := m.host.Stop(ctx, id, grace, conn)
	if err != nil {
		m.fail(context.WithoutCancel(ctx), id, "stop failed: "+err.Error())
		return store.Sandbox{}, false, err
	}
	bg := context.WithoutCancel(ctx)
	if err := m.store.UpdateSandboxState(bg, id, []store.SandboxState{StateRunning, StatePaused}, StateStopped, ""); err != nil {
		return store.Sandbox{}, false, err
	}
	how := "killed"
	if grace > 0 {
		how = fmt.Sprintf("SIGTERM, exited within %s", grace)
		if !graceful {
			how = fmt.Sprintf("SIGTERM, then killed after %s", grace)
		}
	}
	m.event(ctx, rec, "stopped", rec.State, StateStopped, CauseAPI, how)
	out, err := m.store.GetSandbox(bg, id)
	return out, graceful, err
}
