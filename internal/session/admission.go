package session

// Admission: which calls may enter a live sandbox, counted while they run.
//
// A call through the agent (a command, a tool call, a file call, a
// background process's start) is admitted by Acquire, which checks that the
// sandbox runs and takes calls and counts the call in flight in one
// critical section under the registry's mu. The operations that must not
// run beside a call (pause, hibernate, rollback) close admission in one
// critical section with their "nothing in flight" check (closeAdmission),
// under the sandbox's lock, and reopen it when done. So no call can slip between the
// check and the operation, and a call that arrives meanwhile waits for the
// sandbox's lock and then sees the sandbox as the operation left it.

import (
	"context"
	"fmt"
	"sync"

	"github.com/warrenhq/warren/internal/agentconn"
	"github.com/warrenhq/warren/internal/errdefs"
)

// maxAdmitTries bounds how often Acquire waits for an operation that
// closed admission before it gives up: a sandbox paused and resumed
// without end must not hold a caller for ever.
const maxAdmitTries = 5

// Acquire admits one call into a team's running sandbox and returns its
// agent connection and the release to call when the call ends (calling it
// again is harmless). While admitted the call counts in flight: pause and
// hibernate refuse, and rollback refuses unless forced. A paused sandbox
// with autoResume is resumed first.
func (r *registry) Acquire(ctx context.Context, team, id string) (*agentconn.Conn, func(), error) {
	conn, err := r.enter(ctx, team, id, true)
	if err != nil {
		return nil, nil, err
	}
	r.host.CommandStarted(id)
	return conn, r.leaveFunc(id), nil
}

// Agent returns the agent connection of a team's running sandbox without
// counting a call in flight: for the sandbox plane and port tunnels, whose
// streams may outlive any command (a background process's output, a
// WebSocket) and must not keep the sandbox from pausing.
func (r *registry) Agent(ctx context.Context, team, id string) (*agentconn.Conn, error) {
	return r.enter(ctx, team, id, false)
}

func (r *registry) enter(ctx context.Context, team, id string, count bool) (*agentconn.Conn, error) {
	for try := 0; ; try++ {
		if conn, ok := r.admit(team, id, count); ok {
			return conn, nil
		}
		if try == maxAdmitTries {
			return nil, fmt.Errorf("sandbox %s is busy (paused, resumed or rolled back over and over); try again: %w", id, errdefs.ErrConflict)
		}
		if err := r.makeAdmissible(ctx, team, id); err != nil {
			return nil, err
		}
	}
}

// admit is Acquire's fast path: one critical section that checks the
// sandbox takes calls and, if count, counts this one in flight.
func (r *registry) admit(team, id string, count bool) (*agentconn.Conn, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sb := r.live[id]
	if sb == nil || sb.team != team || sb.paused || sb.draining || sb.closedFor != "" {
		return nil, false
	}
	sb.lastActive = r.cfg.Now()
	if count {
		r.running[id]++
	}
	return sb.Agent, true
}

// makeAdmissible finds out why a sandbox did not admit a call: an error
// says why it cannot; nil means try again (an operation that had closed
// admission has ended, or the sandbox was resumed).
func (r *registry) makeAdmissible(ctx context.Context, team, id string) error {
	r.mu.Lock()
	sb := r.live[id]
	closed := sb != nil && sb.team == team && sb.closedFor != ""
	r.mu.Unlock()
	if closed {
		// The operation holds the sandbox's lock until it reopens; a
		// caller that goes away meanwhile stops waiting.
		unlock, err := r.sbLocks.LockContext(ctx, id)
		if err != nil {
			return fmt.Errorf("sandbox %s: waited for an operation on it: %w", id, err)
		}
		unlock()
		return nil
	}
	// Not attached, or not taking calls: the record says why (unknown,
	// another team's, paused, failed).
	rec, err := r.Get(ctx, team, id)
	if err != nil {
		return err
	}
	if filesOnly(rec) {
		// As E2B: a filesystem-only pause has no processes to come back
		// to, and booting them on any stray call would surprise.
		return fmt.Errorf("sandbox %s was paused without its memory: traffic does not resume it; connect to it (POST /sandboxes/%s/connect), which boots it cold: %w", id, id, errdefs.ErrConflict)
	}
	if (rec.State == StatePaused || rec.State == StateHibernated) && rec.AutoResume {
		return r.autoResume(ctx, team, id)
	}
	if rec.State == StatePaused || rec.State == StateHibernated {
		return fmt.Errorf("sandbox %s is %s; resume it first (POST /sandboxes/%s/resume): %w", id, rec.State, id, errdefs.ErrConflict)
	}
	if rec.State != StateRunning {
		return fmt.Errorf("sandbox %s is %s, not running: %w", id, rec.State, errdefs.ErrConflict)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch sb := r.live[id]; {
	case sb == nil:
		return fmt.Errorf("sandbox %s is not attached to this daemon: %w", id, errdefs.ErrUnavailable)
	case sb.draining:
		return fmt.Errorf("sandbox %s is draining: it takes no new calls and stops when its commands finish: %w", id, errdefs.ErrConflict)
	}
	// Running, attached and not draining: it changed under us (resumed,
	// reopened); try again.
	return nil
}

// leaveFunc returns the release of one admitted call.
func (r *registry) leaveFunc(id string) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			if r.running[id]--; r.running[id] <= 0 {
				delete(r.running, id)
			}
			sb := r.live[id]
			writeBack := sb != nil && sb.takesTurns && r.running[id] == 0
			r.mu.Unlock()
			if writeBack {
				r.host.CommandEnded(id)
			}
		})
	}
}

// closeAdmission refuses new calls into sandbox id until the returned
// reopen runs, if no call is in flight (or force: the operation cuts them).
// Its check and the closing are one critical section with Acquire's. The
// caller holds the sandbox's lock until it has reopened; busy > 0 with a
// nil reopen says the calls in flight refused it.
func (r *registry) closeAdmission(id, why string, force bool) (reopen func(), busy int, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sb := r.live[id]
	if sb == nil {
		return nil, 0, fmt.Errorf("sandbox %s is not attached to this daemon: %w", id, errdefs.ErrUnavailable)
	}
	if n := r.running[id]; n > 0 && !force {
		return nil, n, nil
	}
	sb.closedFor = why
	return func() {
		r.mu.Lock()
		sb.closedFor = ""
		r.mu.Unlock()
	}, 0, nil
}

// CommandsInFlight is how many calls run now in all sandboxes (for
// GET /health).
func (r *registry) CommandsInFlight() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.running {
		n += c
	}
	return n
}

func (r *registry) inflight(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.running[id]
}
