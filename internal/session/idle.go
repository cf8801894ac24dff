package session

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
)

// Idle actions.
const (
	IdlePause = "pause"
	IdleKill  = "kill"
	// IdleHibernate saves the memory of a sandbox whose runtime can (gvisor)
	// to disk and frees it; others are paused.
	IdleHibernate = "hibernate"
)

// The timeouts, as OnTimeout names them.
const (
	TimeoutRun       = "run"       // the run timeout (E2B's timeout)
	TimeoutIdle      = "idle"      // no activity for --idle-timeout
	TimeoutRetention = "retention" // paused for --paused-retention
)

// timeoutFired tells OnTimeout that a timeout fired and what was done.
func (m *Manager) timeoutFired(timeout, action string) {
	if m.cfg.OnTimeout != nil {
		m.cfg.OnTimeout(timeout, action)
	}
}

// Touch records activity in a sandbox (an API call that uses it, output of
// its commands, or traffic on a port connection or a long file or watch
// stream: see ActivityMeter), which keeps its idle timeout from firing.
func (m *Manager) Touch(id string) {
	now := m.cfg.Now()
	m.mu.Lock()
	if sb := m.live[id]; sb != nil {
		sb.lastActive = now
	}
	m.mu.Unlock()
}

// ActivityMeter keeps a sandbox from going idle while a long-lived stream
// to it (a tunnelled port connection: a WebSocket, a port-forward; a long
// envd stream: a file upload or download, a directory watch) moves bytes,
// and lets it go idle when the stream stays open but silent. Opening
// the stream was an API call, which touched the sandbox already; the meter
// covers what flows after. Note is on the copy path of every read and
// write, so it touches at most once per interval: a clock read and an
// atomic load otherwise, no lock.
type ActivityMeter struct {
	m     *Manager
	id    string
	every time.Duration
	last  atomic.Int64 // the clock at the last touch, in unix nanoseconds
}

// maxActivityInterval is how often at most a busy stream touches its
// sandbox: the idle loop looks once a second anyway.
const maxActivityInterval = time.Second

// ActivityMeter returns a meter for one stream to sandbox id, or nil (whose
// Note does nothing) when the server has no idle timeout.
func (m *Manager) ActivityMeter(id string) *ActivityMeter {
	if m.cfg.IdleTimeout <= 0 {
		return nil
	}
	// Touches lag the traffic by up to the interval: keep it well inside
	// a short idle timeout.
	every := min(maxActivityInterval, m.cfg.IdleTimeout/4)
	a := &ActivityMeter{m: m, id: id, every: every}
	a.last.Store(m.cfg.Now().UnixNano())
	return a
}

// Note records that bytes moved on the stream, in either direction.
func (a *ActivityMeter) Note() {
	if a == nil {
		return
	}
	now := a.m.cfg.Now()
	last := a.last.Load()
	// Of two directions noting at once, the one that wins the swap touches.
	if now.UnixNano()-last < int64(a.every) || !a.last.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	a.m.Touch(a.id)
}

// idle applies the idle timeout to running sandboxes and the retention
// limit to paused ones. A sandbox with a command in flight is never idle.
func (m *Manager) idle(ctx context.Context) {
	if m.cfg.IdleTimeout <= 0 && m.cfg.PausedRetention <= 0 {
		return
	}
	now := m.cfg.Now()
	type due struct {
		id     string
		paused bool
		since  time.Time
	}
	var todo []due
	m.mu.Lock()
	for id, sb := range m.live {
		switch {
		case sb.paused && m.cfg.PausedRetention > 0 && !sb.pausedAt.IsZero() && now.Sub(sb.pausedAt) >= m.cfg.PausedRetention:
			todo = append(todo, due{id, true, sb.pausedAt})
		case !sb.paused && m.cfg.IdleTimeout > 0 && m.running[id] == 0 && !sb.lastActive.IsZero() && now.Sub(sb.lastActive) >= m.cfg.IdleTimeout:
			todo = append(todo, due{id, false, sb.lastActive})
		}
	}
	m.mu.Unlock()
	for _, d := range todo {
		rec, err := m.store.GetSandbox(ctx, d.id)
		if err != nil {
			continue
		}
		if d.paused {
			m.log.Info("paused sandbox reached its retention; killing it", "sandbox", d.id)
			m.event(ctx, rec, "retention-expired", rec.State, rec.State, CauseTimeout, fmt.Sprintf("paused since %s", d.since.Format(time.RFC3339)))
			m.timeoutFired(TimeoutRetention, IdleKill)
			unlock := m.lockSandbox(d.id)
			if cur, err := m.store.GetSandbox(ctx, d.id); err == nil && (cur.State == StatePaused || cur.State == StateHibernated) {
				_ = m.destroy(ctx, cur, CauseTimeout)
			}
			unlock()
			continue
		}
		detail := fmt.Sprintf("no activity since %s", d.since.Format(time.RFC3339))
		switch m.cfg.IdleAction {
		case IdleKill:
			m.log.Info("sandbox idle; killing it", "sandbox", d.id)
			m.event(ctx, rec, "idle", rec.State, rec.State, CauseTimeout, detail+"; killing")
			m.timeoutFired(TimeoutIdle, IdleKill)
			unlock := m.lockSandbox(d.id)
			if cur, err := m.store.GetSandbox(ctx, d.id); err == nil && cur.State == StateRunning {
				_ = m.destroy(ctx, cur, CauseTimeout)
			}
			unlock()
		case IdleHibernate:
			m.log.Info("sandbox idle; hibernating it", "sandbox", d.id)
			m.event(ctx, rec, "idle", rec.State, rec.State, CauseTimeout, detail+"; hibernating")
			action := IdleHibernate
			_, err := m.hibernate(ctx, rec.Team, d.id, CauseTimeout)
			if errdefs.IsInvalid(err) {
				// Its runtime cannot save memory: pausing is the next best.
				action = IdlePause
				err = m.pause(ctx, rec.Team, d.id, CauseTimeout)
			}
			if err == nil {
				m.timeoutFired(TimeoutIdle, action)
			} else {
				m.log.Warn("hibernate an idle sandbox", "sandbox", d.id, "err", err)
				m.Touch(d.id)
			}
		default:
			m.log.Info("sandbox idle; pausing it", "sandbox", d.id)
			m.event(ctx, rec, "idle", rec.State, rec.State, CauseTimeout, detail+"; pausing")
			if err := m.pause(ctx, rec.Team, d.id, CauseTimeout); err != nil {
				m.log.Warn("pause an idle sandbox", "sandbox", d.id, "err", err)
				m.Touch(d.id) // try again after another idle period, not every second
			} else {
				m.timeoutFired(TimeoutIdle, IdlePause)
			}
		}
	}
}
