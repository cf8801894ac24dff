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
func (l *lifecycle) Stop(ctx context.Context, team, id string, grace time.Duration) (store.Sandbox, bool, error) {
	if grace < 0 || grace > MaxGrace {
		return store.Sandbox{}, false, fmt.Errorf("grace must be 0..%s: %w", MaxGrace, errdefs.ErrInvalid)
	}
	unlock := l.lockSandbox(id)
	defer unlock()
	rec, err := l.Get(ctx, team, id)
	if err != nil {
		return store.Sandbox{}, false, err
	}
	if err := checkTransition(id, rec.State, StateStopped); err != nil {
		return store.Sandbox{}, false, err
	}
	l.mu.Lock()
	sb := l.live[id]
	delete(l.live, id) // nothing may use it, and the watch must not fail it
	l.mu.Unlock()
	var conn *agentconn.Conn
	if sb != nil {
		conn = sb.Agent
	}
	graceful, err := l.host.Stop(ctx, id, grace, conn)
	if err != nil {
		l.fail(context.WithoutCancel(ctx), id, "stop failed: "+err.Error())
		return store.Sandbox{}, false, err
	}
	bg := context.WithoutCancel(ctx)
	if err := l.store.UpdateSandboxState(bg, id, []store.SandboxState{StateRunning, StatePaused, StateHibernated}, StateStopped, ""); err != nil {
		return store.Sandbox{}, false, err
	}
	// A stopped sandbox never runs again (its files stay for snapshots
	// and forks, which ask for their own devices): its devices are free.
	l.devices.release(bg, id)
	how := "killed"
	if grace > 0 {
		how = fmt.Sprintf("SIGTERM, exited within %s", grace)
		if !graceful {
			how = fmt.Sprintf("SIGTERM, then killed after %s", grace)
		}
	}
	l.event(ctx, rec, "stopped", rec.State, StateStopped, CauseAPI, how)
	out, err := l.store.GetSandbox(bg, id)
	return out, graceful, err
}

// MaxDrainWait bounds how long a drain waits for running commands.
const MaxDrainWait = time.Hour

// Drain refuses new calls to a team's running sandbox, waits (at most wait)
// for the commands already running to finish, then stops it like Stop.
func (l *lifecycle) Drain(ctx context.Context, team, id string, wait, grace time.Duration) (store.Sandbox, bool, error) {
	if wait < 0 || wait > MaxDrainWait {
		return store.Sandbox{}, false, fmt.Errorf("drain wait must be 0..%s: %w", MaxDrainWait, errdefs.ErrInvalid)
	}
	rec, err := l.Get(ctx, team, id)
	if err != nil {
		return store.Sandbox{}, false, err
	}
	if rec.State != StateRunning {
		return store.Sandbox{}, false, fmt.Errorf("sandbox %s is %s; only a running sandbox can be drained: %w", id, rec.State, errdefs.ErrConflict)
	}
	l.mu.Lock()
	if sb := l.live[id]; sb != nil {
		sb.draining = true
	}
	l.mu.Unlock()
	l.event(ctx, rec, "draining", rec.State, rec.State, CauseAPI, fmt.Sprintf("waiting up to %s for %d command(s)", wait, l.inflight(id)))
	deadline := time.Now().Add(wait)
	for l.inflight(id) > 0 && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			// The caller gave up on the drain: the sandbox takes calls
			// again rather than refuse them for ever.
			l.mu.Lock()
			if sb := l.live[id]; sb != nil {
				sb.draining = false
			}
			l.mu.Unlock()
			return store.Sandbox{}, false, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return l.Stop(ctx, team, id, grace)
}

// UpdateLimits changes a team's running (or paused) sandbox's memory, CPU
// and pids limits and its disk quota (diskBytes) in place; zero values keep
// theirs. The same bounds as at create apply. A disk quota below what the
// sandbox already holds is refused (ErrConflict): btrfs would accept it,
// but the sandbox would be over quota at once, every write failing with no
// sign of why; the caller frees space first.
func (l *lifecycle) UpdateLimits(ctx context.Context, team, id string, limits runtime.Limits, diskBytes int64) (store.Sandbox, error) {
	check := CreateRequest{Team: team, Limits: limits, DiskBytes: diskBytes}
	if err := l.validate(&check); err != nil {
		return store.Sandbox{}, err
	}
	if limits == (runtime.Limits{}) && diskBytes == 0 {
		return store.Sandbox{}, fmt.Errorf("give at least one of memoryMB, cpuCount, pids, diskMB: %w", errdefs.ErrInvalid)
	}
	unlock := l.lockSandbox(id)
	defer unlock()
	rec, err := l.Get(ctx, team, id)
	if err != nil {
		return store.Sandbox{}, err
	}
	if rec.State != StateRunning && rec.State != StatePaused {
		return store.Sandbox{}, fmt.Errorf("sandbox %s is %s: %w", id, rec.State, errdefs.ErrConflict)
	}
	release, err := l.admitTeam(ctx, team, growth(rec, limits, diskBytes))
	if err != nil {
		return store.Sandbox{}, err
	}
	defer release()
	bg := context.WithoutCancel(ctx)
	if diskBytes > 0 {
		used, _, err := l.host.GroupUsage(ctx, rec.ID)
		if err != nil {
			return store.Sandbox{}, err
		}
		if diskBytes < used {
			return store.Sandbox{}, fmt.Errorf("sandbox %s holds %d MiB (its snapshots included), more than a disk quota of %d MiB: remove files or snapshots first, or ask for more: %w",
				id, (used+1<<20-1)>>20, diskBytes>>20, errdefs.ErrConflict)
		}
		if err := l.host.SetQuota(ctx, rec.ID, diskBytes); err != nil {
			return store.Sandbox{}, err
		}
		if err := l.store.SetSandboxQuota(bg, id, diskBytes); err != nil {
			return store.Sandbox{}, err
		}
	}
	if limits != (runtime.Limits{}) {
		if err := l.host.UpdateLimits(ctx, id, limits); err != nil {
			return store.Sandbox{}, err
		}
		if err := l.store.SetSandboxLimits(bg, id, limits.MemoryBytes, limits.CPUMillis, limits.Pids); err != nil {
			return store.Sandbox{}, err
		}
	}
	l.event(ctx, rec, "limits-updated", rec.State, rec.State, CauseAPI,
		fmt.Sprintf("memory %d MiB, cpu %d millis, pids %d, disk %d MiB (0 = unchanged)", limits.MemoryBytes>>20, limits.CPUMillis, limits.Pids, diskBytes>>20))
	return l.store.GetSandbox(bg, id)
}

// growth is what a limit change adds to its sandbox's team (negative
// where it shrinks; zero fields keep theirs). A paused sandbox counts as
// alive, so its memory and CPUs count too.
func growth(rec store.Sandbox, l runtime.Limits, diskBytes int64) demand {
	var d demand
	if l.MemoryBytes > 0 {
		d.MemoryBytes = l.MemoryBytes - rec.MemoryBytes
	}
	if l.CPUMillis > 0 {
		d.CPUMillis = l.CPUMillis - rec.CPUMillis
	}
	if diskBytes > 0 {
		d.DiskBytes = diskBytes - rec.QuotaBytes
	}
	return d
}
