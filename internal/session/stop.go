package session

import (
	"context"
	"fmt"
	"time"

	"github.com/warrenhq/warren/internal/agentconn"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/runtime"
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
	if err := m.store.UpdateSandboxState(bg, id, []store.SandboxState{StateRunning, StatePaused, StateHibernated}, StateStopped, ""); err != nil {
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

// MaxDrainWait bounds how long a drain waits for running commands.
const MaxDrainWait = time.Hour

// Drain refuses new calls to a team's running sandbox, waits (at most wait)
// for the commands already running to finish, then stops it like Stop.
func (m *Manager) Drain(ctx context.Context, team, id string, wait, grace time.Duration) (store.Sandbox, bool, error) {
	if wait < 0 || wait > MaxDrainWait {
		return store.Sandbox{}, false, fmt.Errorf("drain wait must be 0..%s: %w", MaxDrainWait, errdefs.ErrInvalid)
	}
	rec, err := m.Get(ctx, team, id)
	if err != nil {
		return store.Sandbox{}, false, err
	}
	if rec.State != StateRunning {
		return store.Sandbox{}, false, fmt.Errorf("sandbox %s is %s; only a running sandbox can be drained: %w", id, rec.State, errdefs.ErrConflict)
	}
	m.mu.Lock()
	if sb := m.live[id]; sb != nil {
		sb.draining = true
	}
	m.mu.Unlock()
	m.event(ctx, rec, "draining", rec.State, rec.State, CauseAPI, fmt.Sprintf("waiting up to %s for %d command(s)", wait, m.inflight(id)))
	deadline := time.Now().Add(wait)
	for m.inflight(id) > 0 && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			// The caller gave up on the drain: the sandbox takes calls
			// again rather than refuse them for ever.
			m.mu.Lock()
			if sb := m.live[id]; sb != nil {
				sb.draining = false
			}
			m.mu.Unlock()
			return store.Sandbox{}, false, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return m.Stop(ctx, team, id, grace)
}

// UpdateLimits changes a team's running (or paused) sandbox's memory, CPU
// and pids limits and its disk quota (diskBytes) in place; zero values keep
// theirs. The same bounds as at create apply. A disk quota below what the
// sandbox already holds is refused (ErrConflict): btrfs would accept it,
// but the sandbox would be over quota at once, every write failing with no
// sign of why; the caller frees space first.
func (m *Manager) UpdateLimits(ctx context.Context, team, id string, l runtime.Limits, diskBytes int64) (store.Sandbox, error) {
	check := CreateRequest{Team: team, Limits: l, DiskBytes: diskBytes}
	if err := m.validate(&check); err != nil {
		return store.Sandbox{}, err
	}
	if l == (runtime.Limits{}) && diskBytes == 0 {
		return store.Sandbox{}, fmt.Errorf("give at least one of memoryMB, cpuCount, pids, diskMB: %w", errdefs.ErrInvalid)
	}
	unlock := m.lockSandbox(id)
	defer unlock()
	rec, err := m.Get(ctx, team, id)
	if err != nil {
		return store.Sandbox{}, err
	}
	if rec.State != StateRunning && rec.State != StatePaused {
		return store.Sandbox{}, fmt.Errorf("sandbox %s is %s: %w", id, rec.State, errdefs.ErrConflict)
	}
	bg := context.WithoutCancel(ctx)
	if diskBytes > 0 {
		used, _, err := m.host.GroupUsage(ctx, rec.ID)
		if err != nil {
			return store.Sandbox{}, err
		}
		if diskBytes < used {
			return store.Sandbox{}, fmt.Errorf("sandbox %s holds %d MiB (its snapshots included), more than a disk quota of %d MiB: remove files or snapshots first, or ask for more: %w",
				id, (used+1<<20-1)>>20, diskBytes>>20, errdefs.ErrConflict)
		}
		if err := m.host.SetQuota(ctx, rec.ID, diskBytes); err != nil {
			return store.Sandbox{}, err
		}
		if err := m.store.SetSandboxQuota(bg, id, diskBytes); err != nil {
			return store.Sandbox{}, err
		}
	}
	if l != (runtime.Limits{}) {
		if err := m.host.UpdateLimits(ctx, id, l); err != nil {
			return store.Sandbox{}, err
		}
		if err := m.store.SetSandboxLimits(bg, id, l.MemoryBytes, l.CPUMillis, l.Pids); err != nil {
			return store.Sandbox{}, err
		}
	}
	m.event(ctx, rec, "limits-updated", rec.State, rec.State, CauseAPI,
		fmt.Sprintf("memory %d MiB, cpu %d millis, pids %d, disk %d MiB (0 = unchanged)", l.MemoryBytes>>20, l.CPUMillis, l.Pids, diskBytes>>20))
	return m.store.GetSandbox(bg, id)
}
