package session

import (
	"sync/atomic"
	"time"
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

// Touch records activity in a sandbox (an API call that uses it, output of
// its commands, or traffic on a port connection or a long file or watch
// stream: see ActivityMeter), which keeps its idle timeout from firing.
func (r *registry) Touch(id string) {
	now := r.cfg.Now()
	r.mu.Lock()
	if sb := r.live[id]; sb != nil {
		sb.lastActive = now
	}
	r.mu.Unlock()
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
	r     *registry
	id    string
	every time.Duration
	last  atomic.Int64 // the clock at the last touch, in unix nanoseconds
}

// maxActivityInterval is how often at most a busy stream touches its
// sandbox: the idle loop looks once a second anyway.
const maxActivityInterval = time.Second

// ActivityMeter returns a meter for one stream to sandbox id, or nil (whose
// Note does nothing) when the server has no idle timeout.
func (r *registry) ActivityMeter(id string) *ActivityMeter {
	if r.cfg.IdleTimeout <= 0 {
		return nil
	}
	// Touches lag the traffic by up to the interval: keep it well inside
	// a short idle timeout.
	every := min(maxActivityInterval, r.cfg.IdleTimeout/4)
	a := &ActivityMeter{r: r, id: id, every: every}
	a.last.Store(r.cfg.Now().UnixNano())
	return a
}

// Note records that bytes moved on the stream, in either direction.
func (a *ActivityMeter) Note() {
	if a == nil {
		return
	}
	now := a.r.cfg.Now()
	last := a.last.Load()
	// Of two directions noting at once, the one that wins the swap touches.
	if now.UnixNano()-last < int64(a.every) || !a.last.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	a.r.Touch(a.id)
}
