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
	"sync"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/store"
)

// timeouts finds the sandboxes whose run timeout, idle timeout or paused
// retention is due, or that died, and runs the action for each.
type timeouts struct {
	*registry
	host  timeoutHost
	store timeoutStore
	act   timeoutActions

	// actions are the timeout actions under way, each holding one of
	// actionSlots.
	actions     sync.WaitGroup
	actionSlots chan struct{}
}

// timeoutActions are the lifecycle's steps a timeout takes, under the
// sandbox's lock.
type timeoutActions interface {
	destroy(ctx context.Context, rec store.Sandbox, cause string) error
	pauseLocked(ctx context.Context, team, id, cause string) error
	pauseFilesLocked(ctx context.Context, team, id, cause string) error
	hibernateLocked(ctx context.Context, team, id, cause string) (store.Sandbox, error)
}

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
func (t *timeouts) dispatch(ctx context.Context, id string, action func(context.Context)) {
	select {
	case t.actionSlots <- struct{}{}:
	case <-ctx.Done():
		return
	}
	unlock, ok := t.sbLocks.TryLock(id)
	if !ok {
		<-t.actionSlots
		return
	}
	t.actions.Add(1)
	go func() {
		defer t.actions.Done()
		defer func() { <-t.actionSlots }()
		defer unlock()
		action(ctx)
	}()
}

// timeoutFired tells OnTimeout that a timeout fired and its action was
// done; a failed action counts nothing.
func (t *timeouts) timeoutFired(timeout, action string) {
	if t.cfg.OnTimeout != nil {
		t.cfg.OnTimeout(timeout, action)
	}
}

// expire applies the run timeout to running sandboxes. A paused sandbox's
// run timeout does not tick (Resume extends it).
func (t *timeouts) expire(ctx context.Context) {
	recs, err := t.store.ListSandboxes(ctx, store.SandboxFilter{States: []store.SandboxState{StateRunning}})
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			t.log.Warn("list sandboxes for timeouts", "err", err)
		}
		return
	}
	now := t.cfg.Now()
	for _, rec := range recs {
		if rec.EndAt.IsZero() || now.Before(rec.EndAt) {
			continue
		}
		t.dispatch(ctx, rec.ID, func(ctx context.Context) { t.expireOne(ctx, rec.ID, now) })
	}
}

// expireOne kills (or, with autoPause, pauses) a sandbox whose run timeout
// was reached at now, if it still was once its lock was taken.
func (t *timeouts) expireOne(ctx context.Context, id string, now time.Time) {
	cur, err := t.store.GetSandbox(ctx, id)
	if err != nil || cur.State != StateRunning || cur.EndAt.IsZero() || cur.EndAt.After(now) {
		return // gone, or its timeout changed meanwhile
	}
	reached := "run timeout reached at " + cur.EndAt.Format(time.RFC3339)
	if cur.AutoPause {
		t.log.Info("sandbox timed out; pausing it", "sandbox", id, "endAt", cur.EndAt, "filesOnly", cur.AutoPauseFilesOnly)
		pause := t.act.pauseLocked
		if cur.AutoPauseFilesOnly {
			pause = t.act.pauseFilesLocked
		}
		if err := pause(ctx, cur.Team, id, CauseTimeout); err != nil {
			t.log.Warn("pause timed-out sandbox", "sandbox", id, "err", err)
			return
		}
		t.event(ctx, cur, "timed-out", cur.State, StatePaused, CauseTimeout, reached+"; paused (autoPause)")
		t.timeoutFired(TimeoutRun, IdlePause)
		return
	}
	t.log.Info("sandbox timed out; killing it", "sandbox", id, "endAt", cur.EndAt)
	t.event(ctx, cur, "timed-out", cur.State, cur.State, CauseTimeout, reached)
	if err := t.act.destroy(ctx, cur, CauseTimeout); err != nil {
		t.log.Warn("kill timed-out sandbox", "sandbox", id, "err", err)
		return
	}
	t.timeoutFired(TimeoutRun, IdleKill)
}

// watch fails live sandboxes whose processes are gone (PID 1, the agent,
// was killed from inside, or the sandbox was OOM-killed as a whole) and
// frees what they held; the record stays, with the reason, for inspection.
// A sandbox being rolled back (which stops and restarts its processes on
// purpose) holds its lock, so the watch skips it.
func (t *timeouts) watch(ctx context.Context) {
	t.mu.Lock()
	ids := make([]string, 0, len(t.live))
	for id, sb := range t.live {
		if !sb.hibernated { // it has no processes, by design
			ids = append(ids, id)
		}
	}
	t.mu.Unlock()
	for _, id := range ids {
		t.dispatch(ctx, id, func(ctx context.Context) { t.watchOne(ctx, id) })
	}
}

func (t *timeouts) watchOne(ctx context.Context, id string) {
	t.mu.Lock()
	sb := t.live[id]
	t.mu.Unlock()
	if sb == nil || sb.hibernated {
		return
	}
	if alive, err := t.host.Alive(ctx, id); err != nil || alive {
		return
	}
	const reason = "the sandbox's init process (its agent) exited"
	t.mu.Lock()
	delete(t.live, id)
	t.mu.Unlock()
	if err := t.store.UpdateSandboxState(ctx, id, []store.SandboxState{StateRunning, StatePaused}, StateFailed, reason); err != nil {
		return
	}
	t.log.Warn("sandbox died; marked failed", "sandbox", id)
	t.event(ctx, store.Sandbox{ID: id, Team: sb.team}, "failed", StateRunning, StateFailed, CauseError, reason)
	if err := t.host.Destroy(ctx, id, sb.Agent); err != nil {
		t.log.Warn("free a dead sandbox", "sandbox", id, "err", err)
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
func (t *timeouts) idle(ctx context.Context) {
	if t.cfg.IdleTimeout <= 0 && t.cfg.PausedRetention <= 0 {
		return
	}
	var due []idleSince
	t.mu.Lock()
	for id, sb := range t.live {
		if d, ok := t.idleDue(id, sb); ok {
			due = append(due, d)
		}
	}
	t.mu.Unlock()
	for _, d := range due {
		t.dispatch(ctx, d.id, func(ctx context.Context) { t.idleOne(ctx, d) })
	}
}

// idleDue says whether a live sandbox is due for its idle action or its
// retention's end, and since when. Call with t.mu held.
func (t *timeouts) idleDue(id string, sb *liveSandbox) (idleSince, bool) {
	now := t.cfg.Now()
	switch {
	case sb.paused && t.cfg.PausedRetention > 0 && !sb.pausedAt.IsZero() && now.Sub(sb.pausedAt) >= t.cfg.PausedRetention:
		return idleSince{id, true, sb.pausedAt}, true
	case !sb.paused && t.cfg.IdleTimeout > 0 && t.running[id] == 0 && !sb.lastActive.IsZero() && now.Sub(sb.lastActive) >= t.cfg.IdleTimeout:
		return idleSince{id, false, sb.lastActive}, true
	}
	return idleSince{}, false
}

// idleOne acts on a sandbox found idle, if it still is now that its lock
// is held.
func (t *timeouts) idleOne(ctx context.Context, d idleSince) {
	t.mu.Lock()
	sb := t.live[d.id]
	var still bool
	if sb != nil {
		_, still = t.idleDue(d.id, sb)
	}
	t.mu.Unlock()
	if !still {
		return
	}
	rec, err := t.store.GetSandbox(ctx, d.id)
	if err != nil {
		return
	}
	if d.paused {
		t.retentionExpired(ctx, rec, d.since)
		return
	}
	detail := fmt.Sprintf("no activity since %s", d.since.Format(time.RFC3339))
	switch t.cfg.IdleAction {
	case IdleKill:
		if rec.State != StateRunning {
			return
		}
		t.log.Info("sandbox idle; killing it", "sandbox", d.id)
		t.event(ctx, rec, "idle", rec.State, rec.State, CauseTimeout, detail+"; killing")
		if err := t.act.destroy(ctx, rec, CauseTimeout); err != nil {
			t.log.Warn("kill an idle sandbox", "sandbox", d.id, "err", err)
			return
		}
		t.timeoutFired(TimeoutIdle, IdleKill)
	case IdleHibernate:
		t.log.Info("sandbox idle; hibernating it", "sandbox", d.id)
		t.event(ctx, rec, "idle", rec.State, rec.State, CauseTimeout, detail+"; hibernating")
		action := IdleHibernate
		_, err := t.act.hibernateLocked(ctx, rec.Team, d.id, CauseTimeout)
		if errdefs.IsInvalid(err) {
			// Its runtime cannot save memory: pausing is the next best.
			action = IdlePause
			err = t.act.pauseLocked(ctx, rec.Team, d.id, CauseTimeout)
		}
		t.idleActed(d.id, action, err)
	default:
		t.log.Info("sandbox idle; pausing it", "sandbox", d.id)
		t.event(ctx, rec, "idle", rec.State, rec.State, CauseTimeout, detail+"; pausing")
		t.idleActed(d.id, IdlePause, t.act.pauseLocked(ctx, rec.Team, d.id, CauseTimeout))
	}
}

// idleActed counts an idle action that worked; one that failed is tried
// again after another idle period, not every tick.
func (t *timeouts) idleActed(id, action string, err error) {
	if err != nil {
		t.log.Warn("act on an idle sandbox", "sandbox", id, "action", action, "err", err)
		t.Touch(id)
		return
	}
	t.timeoutFired(TimeoutIdle, action)
}

// retentionExpired kills a sandbox paused for longer than the retention.
func (t *timeouts) retentionExpired(ctx context.Context, rec store.Sandbox, since time.Time) {
	if rec.State != StatePaused && rec.State != StateHibernated {
		return
	}
	t.log.Info("paused sandbox reached its retention; killing it", "sandbox", rec.ID)
	t.event(ctx, rec, "retention-expired", rec.State, rec.State, CauseTimeout, fmt.Sprintf("paused since %s", since.Format(time.RFC3339)))
	if err := t.act.destroy(ctx, rec, CauseTimeout); err != nil {
		t.log.Warn("kill a sandbox past its retention", "sandbox", rec.ID, "err", err)
		return
	}
	t.timeoutFired(TimeoutRetention, IdleKill)
}
