package native

import (
	"errors"
	"fmt"
	"time"

	"github.com/opencontainers/runc/libcontainer"
	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/errdefs"
)

const (
	// killTimeout bounds how long Destroy waits for the sandbox's processes
	// to leave its cgroup after SIGKILL (tasks in uninterruptible sleep on
	// a slow filesystem can take a while).
	killTimeout = 10 * time.Second
	// sweepAfter is when teardown stops trusting the pid namespace to take
	// every process down with PID 1 and kills stragglers one by one.
	sweepAfter = time.Second
)

// teardown kills c's processes and removes its cgroups and state directory.
// It ignores the caller's context: a half-destroyed sandbox is worse than a
// late answer, and every wait here is bounded.
func (r *Runtime) teardown(c *libcontainer.Container) error {
	// Frozen (cgroup v1) tasks do not die until thawed.
	if st, err := c.Status(); err == nil && st == libcontainer.Paused {
		if err := c.Resume(); err != nil {
			r.log.Warn("thaw before kill", "sandbox", c.ID(), "err", err)
		}
	}
	// PID 1 of a pid namespace takes every process of the namespace with it.
	if err := c.Signal(unix.SIGKILL); err != nil && !errors.Is(err, libcontainer.ErrNotRunning) {
		r.log.Warn("kill init", "sandbox", c.ID(), "err", err)
	}
	start := time.Now()
	wait := time.Millisecond
	for {
		pids, err := c.Processes()
		if err != nil {
			pids = nil // no cgroup (left or never made): nothing runs
		}
		st, serr := c.Status()
		// A status error means the cgroup is already gone; Destroy below
		// refuses anyway if PID 1 were still alive.
		initGone := serr != nil || st == libcontainer.Stopped
		if len(pids) == 0 && initGone {
			break
		}
		if time.Since(start) > killTimeout {
			return fmt.Errorf("%d process(es) still in the sandbox's cgroup %s after SIGKILL: %w", len(pids), killTimeout, errdefs.ErrUnavailable)
		}
		if time.Since(start) > sweepAfter {
			// Only processes that joined the cgroup from outside the pid
			// namespace get here; the pids are read from the cgroup itself.
			for _, pid := range pids {
				_ = unix.Kill(pid, unix.SIGKILL)
			}
		}
		time.Sleep(wait)
		wait = min(2*wait, 20*time.Millisecond)
	}
	// Removes the cgroups (retrying while the last tasks leave) and the
	// state directory.
	if err := c.Destroy(); err != nil {
		return err
	}
	return r.roots.remove(c.ID())
}
