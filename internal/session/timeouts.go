package session

// Timeouts: the run timeout, the idle timeout, the retention of paused
// sandboxes, and the watch for sandboxes that died. Each is its own loop,
// and each loop only finds what is due: the action for one sandbox (kill,
// pause, hibernate, fail) runs in a goroutine of its own holding that
// sandbox's lock. A sandbox whose lock is taken (a rollback, a snapshot,
// an earlier action still running — even one stuck in a runtime call) is
// skipped and looked at again on the next tick, so one stuck sandbox
// cannot hold back the others' timeouts.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/store"
)

// DefaultTimeoutTick is how often the timeout loops look.
const DefaultTimeoutTick = time.Second

// maxTimeoutActions bounds the timeout actions that run at once: a pass
// over many due sandboxes does not start a runtime call for each at once,
// and an action stuck in a runtime call holds one slot, not the loop.
const maxTimeoutActions = 8

// Start runs the manager's background work until ctx ends or Close is
// called: the timeout loops, the pools, the snapshot deleter and the
// archiver, each in its own goroutine, all joined by Close.
func (m *Manager) Start(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	m.mu.Lock()
	m.stopBackground = cancel
	m.mu.Unlock()
	tick := m.cfg.TimeoutTick
	if tick <= 0 {
		tick = DefaultTimeoutTick
	}
	for _, run := range []func(context.Context){
		m.runPools,
		m.runDeletes,
		m.runArchiver,
		func(ctx context.Context) { every(ctx, tick, m.expire) },
		func(ctx context.Context) { every(ctx, tick, m.idle) },
		func(ctx context.Context) { every(ctx, tick, m.watch) },
	} {
		m.background.Add(1)
		go func() {
			defer m.background.Done()
			run(ctx)
		}()
	}
}

// every runs pass every d until ctx ends.
func every(ctx context.Context, d time.Duration, pass func(context.Context)) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			pass(ctx)
		}
	}
}

// dispatch runs action for sandbox id in a goroutine of its own that holds
// the sandbox's lock, unless the sandbox is busy (its lock held or waited
// for): the next pass looks again. It waits for a free action slot.
func (m *Manager) dispatch(ctx context.Context, id string, action func(context.Context)) {
	select {
	case m.actionSlots <- struct{}{}:
	case <-ctx.Done():
		return
	}
	unlock, ok := m.sbLocks.TryLock(id)
	if !ok {
		<-m.actionSlots
		return
	}
	m.actions.Add(1)
	go func() {
		defer m.actions.Done()
		defer func() { <-m.actionSlots }()
		defer unlock()
		action(ctx)
	}()
}

// timeoutFired tells OnTimeout that a timeout fired and its action was
// done; a failed action counts nothing.
func (m *Manager) timeoutFired(timeout, action string) {
	if m.cfg.OnTimeout != nil {
		m.cfg.OnTimeout(timeout, action)
	}
}

// expire applies the run timeout to running sandboxes. A paused sandbox's
// run timeout does not tick (Resume extends it).
func (m *Manager) expire(ctx context.Context) {
	recs, err := m.store.ListSandboxes(ctx, store.SandboxFilter{States: []store.SandboxState{StateRunning}})
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			m.log.Warn("list sandboxes for timeouts", "err", err)
		}
		return
	}
	now := m.cfg.Now()
	for _, rec := range recs {
		if rec.EndAt.IsZero() || now.Before(rec.EndAt) {
			continue
		}
		m.dispatch(ctx, rec.ID, func(ctx context.Context) { m.expireOne(ctx, rec.ID, now) })
	}
}

// expireOne kills (or, with autoPause, pauses) a sandbox whose run timeout
// was reached at now, if it still was once its lock was taken.
func (m *Manager) expireOne(ctx context.Context, id string, now time.Time) {
	cur, err := m.store.GetSandbox(ctx, id)
	if err != nil || cur.State != StateRunning || cur.EndAt.IsZero() || cur.EndAt.After(now) {
		return // gone, or its timeout changed meanwhile
	}
	reached := "run timeout reached at " + cur.EndAt.Format(time.RFC3339)
	if cur.AutoPause {
		m.log.Info("sandbox timed out; pausing it", "sandbox", id, "endAt", cur.EndAt)
		if err := m.pauseLocked(ctx, cur.Team, id, CauseTimeout); err != nil {
			m.log.Warn("pause timed-out sandbox", "sandbox", id, "err", err)
			return
		}
		m.event(ctx, cur, "timed-out", cur.State, StatePaused, CauseTimeout, reached+"; paused (autoPause)")
		m.timeoutFired(TimeoutRun, IdlePause)
		return
	}
	m.log.Info("sandbox timed out; killing it", "sandbox", id, "endAt", cur.EndAt)
	m.event(ctx, cur, "timed-out", cur.State, cur.State, CauseTimeout, reached)
	if err := m.destroy(ctx, cur, CauseTimeout); err != nil {
		m.log.Warn("kill timed-out sandbox", "sandbox", id, "err", err)
		return
	}
	m.timeoutFired(TimeoutRun, IdleKill)
}

// watch fails live sandboxes whose processes are gone (PID 1, the agent,
// was killed from inside, or the sandbox was OOM-killed as a whole) and
// frees what they held; the record stays, with the reason, for inspection.
// A sandbox being rolled back (which stops and restarts its processes on
// purpose) holds its lock, so the watch skips it.
func (m *Manager) watch(ctx context.Context) {
	m.mu.Lock()
	ids := make([]string, 0, len(m.live))
	for id, sb := range m.live {
		if !sb.hibernated { // it has no processes, by design
			ids = append(ids, id)
		}
	}
	m.mu.Unlock()
	for _, id := range ids {
		m.dispatch(ctx, id, func(ctx context.Context) { m.watchOne(ctx, id) })
	}
}

func (m *Manager) watchOne(ctx context.Context, id string) {
	m.mu.Lock()
	sb := m.live[id]
	m.mu.Unlock()
	if sb == nil || sb.hibernated {
		return
	}
	if alive, err := m.host.Alive(ctx, id); err != nil || alive {
		return
	}
	const reason = "the sandbox's init process (its agent) exited"
	m.mu.Lock()
	delete(m.live, id)
	m.mu.Unlock()
	if err := m.store.UpdateSandboxState(ctx, id, []store.SandboxState{StateRunning, StatePaused}, StateFailed, reason); err != nil {
		return
	}
	m.log.Warn("sandbox died; marked failed", "sandbox", id)
	m.event(ctx, store.Sandbox{ID: id, Team: sb.team}, "failed", StateRunning, StateFailed, CauseError, reason)
	if err := m.host.Destroy(ctx, id, sb.Agent); err != nil {
		m.log.Warn("free a dead sandbox", "sandbox", id, "err", err)
	}
}

// idleSince is a sandbox found idle (or paused past retention) by a pass.
type idleSince struct {
	id     string
	paused bool
	since  time.Time
}

// idle applies the idle timeout to running sandboxes and the retention
// limit to paused ones. A sandbox with a call in flight is never idle.
func (m *Manager) idle(ctx context.Context) {
	if m.cfg.IdleTimeout <= 0 && m.cfg.PausedRetention <= 0 {
		return
	}
	var due []idleSince
	m.mu.Lock()
	for id, sb := range m.live {
		if d, ok := m.idleDue(id, sb); ok {
			due = append(due, d)
		}
	}
	m.mu.Unlock()
	for _, d := range due {
		m.dispatch(ctx, d.id, func(ctx context.Context) { m.idleOne(ctx, d) })
	}
}

// idleDue says whether a live sandbox is due for its idle action or its
// retention's end, and since when. Call with m.mu held.
func (m *Manager) idleDue(id string, sb *liveSandbox) (idleSince, bool) {
	now := m.cfg.Now()
	switch {
	case sb.paused && m.cfg.PausedRetention > 0 && !sb.pausedAt.IsZero() && now.Sub(sb.pausedAt) >= m.cfg.PausedRetention:
		return idleSince{id, true, sb.pausedAt}, true
	case !sb.paused && m.cfg.IdleTimeout > 0 && m.running[id] == 0 && !sb.lastActive.IsZero() && now.Sub(sb.lastActive) >= m.cfg.IdleTimeout:
		return idleSince{id, false, sb.lastActive}, true
	}
	return idleSince{}, false
}

// idleOne acts on a sandbox found idle, if it still is now that its lock
// is held.
func (m *Manager) idleOne(ctx context.Context, d idleSince) {
	m.mu.Lock()
	sb := m.live[d.id]
	var still bool
	if sb != nil {
		_, still = m.idleDue(d.id, sb)
	}
	m.mu.Unlock()
	if !still {
		return
	}
	rec, err := m.store.GetSandbox(ctx, d.id)
	if err != nil {
		return
	}
	if d.paused {
		m.retentionExpired(ctx, rec, d.since)
		return
	}
	detail := fmt.Sprintf("no activity since %s", d.since.Format(time.RFC3339))
	switch m.cfg.IdleAction {
	case IdleKill:
		if rec.State != StateRunning {
			return
		}
		m.log.Info("sandbox idle; killing it", "sandbox", d.id)
		m.event(ctx, rec, "idle", rec.State, rec.State, CauseTimeout, detail+"; killing")
		if err := m.destroy(ctx, rec, CauseTimeout); err != nil {
			m.log.Warn("kill an idle sandbox", "sandbox", d.id, "err", err)
			return
		}
		m.timeoutFired(TimeoutIdle, IdleKill)
	case IdleHibernate:
		m.log.Info("sandbox idle; hibernating it", "sandbox", d.id)
		m.event(ctx, rec, "idle", rec.State, rec.State, CauseTimeout, detail+"; hibernating")
		action := IdleHibernate
		_, err := m.hibernateLocked(ctx, rec.Team, d.id, CauseTimeout)
		if errdefs.IsInvalid(err) {
			// Its runtime cannot save memory: pausing is the next best.
			action = IdlePause
			err = m.pauseLocked(ctx, rec.Team, d.id, CauseTimeout)
		}
		m.idleActed(d.id, action, err)
	default:
		m.log.Info("sandbox idle; pausing it", "sandbox", d.id)
		m.event(ctx, rec, "idle", rec.State, rec.State, CauseTimeout, detail+"; pausing")
		m.idleActed(d.id, IdlePause, m.pauseLocked(ctx, rec.Team, d.id, CauseTimeout))
	}
}

// idleActed counts an idle action that worked; one that failed is tried
// again after another idle period, not every tick.
func (m *Manager) idleActed(id, action string, err error) {
	if err != nil {
		m.log.Warn("act on an idle sandbox", "sandbox", id, "action", action, "err", err)
		m.Touch(id)
		return
	}
	m.timeoutFired(TimeoutIdle, action)
}

// retentionExpired kills a sandbox paused for longer than the retention.
func (m *Manager) retentionExpired(ctx context.Context, rec store.Sandbox, since time.Time) {
	if rec.State != StatePaused && rec.State != StateHibernated {
		return
	}
	m.log.Info("paused sandbox reached its retention; killing it", "sandbox", rec.ID)
	m.event(ctx, rec, "retention-expired", rec.State, rec.State, CauseTimeout, fmt.Sprintf("paused since %s", since.Format(time.RFC3339)))
	if err := m.destroy(ctx, rec, CauseTimeout); err != nil {
		m.log.Warn("kill a sandbox past its retention", "sandbox", rec.ID, "err", err)
		return
	}
	m.timeoutFired(TimeoutRetention, IdleKill)
}
