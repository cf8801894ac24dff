package native

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/opencontainers/runc/libcontainer"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
	"github.com/warrenhq/warren/internal/runtime"
)

// load returns id's container as its state directory describes it (so a
// sandbox started by an earlier daemon and one started by this one are
// handled the same way), read once and then kept. Callers hold id's lock.
func (r *Runtime) load(id string) (*libcontainer.Container, error) {
	if err := ids.Validate("sandbox id", id); err != nil {
		return nil, err
	}
	// Decoding the state file is most of a pause's or a resume's time, and
	// the container does not change under us (every change is made here,
	// under the sandbox's lock): keep the loaded one while its state file
	// is there.
	if c, ok := r.containers.Load(id); ok {
		if _, err := os.Stat(filepath.Join(r.stateDir, id, "state.json")); err == nil {
			return c.(*libcontainer.Container), nil
		}
		r.containers.Delete(id)
	}
	c, err := r.loadFresh(id)
	if err != nil {
		return nil, err
	}
	r.containers.Store(id, c)
	return c, nil
}

// loadFresh reads id's container from its state directory, bypassing the
// cache (for readers that do not hold the sandbox's lock).
func (r *Runtime) loadFresh(id string) (*libcontainer.Container, error) {
	if err := ids.Validate("sandbox id", id); err != nil {
		return nil, err
	}
	c, err := libcontainer.Load(r.stateDir, id)
	if errors.Is(err, libcontainer.ErrNotExist) || errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: load state: %w", id, err)
	}
	return c, nil
}

// statusOf maps libcontainer's states onto ours. "Created" (runc init is
// waiting to exec PID 1) only survives a daemon that died inside Start; the
// user's PID 1 never ran, so it reads as stopped and the daemon destroys it.
func statusOf(c *libcontainer.Container) (runtime.Status, error) {
	st, err := c.Status()
	if err != nil {
		return runtime.Status{}, err
	}
	s, err := c.State()
	if err != nil {
		return runtime.Status{}, err
	}
	out := runtime.Status{ID: c.ID(), State: runtime.StateStopped, Created: s.Created}
	switch st {
	case libcontainer.Running:
		out.State, out.InitPID = runtime.StateRunning, s.InitProcessPid
	case libcontainer.Paused:
		out.State, out.InitPID = runtime.StatePaused, s.InitProcessPid
	}
	return out, nil
}

// Status reports id's current state.
func (r *Runtime) Status(ctx context.Context, id string) (runtime.Status, error) {
	unlock := r.locks.Lock(id)
	defer unlock()
	c, err := r.load(id)
	if err != nil {
		return runtime.Status{}, err
	}
	st, err := statusOf(c)
	if err != nil {
		return runtime.Status{}, fmt.Errorf("sandbox %s: read state: %w", id, err)
	}
	return st, nil
}

// Recover reattaches to a sandbox an earlier daemon started. Everything
// this runtime needs is in the state directory, so it is Status with a log
// line; PID 1 is no longer our child, and its exit is seen through /proc.
func (r *Runtime) Recover(ctx context.Context, id string) (runtime.Status, error) {
	st, err := r.Status(ctx, id)
	if err != nil {
		return st, err
	}
	r.log.Info("recovered sandbox", "sandbox", id, "state", st.State, "pid", st.InitPID)
	return st, nil
}

// Pause freezes every process of the sandbox (cgroup freezer). Pausing a
// paused sandbox does nothing; pausing a stopped one is ErrConflict.
func (r *Runtime) Pause(ctx context.Context, id string) error {
	unlock := r.locks.Lock(id)
	defer unlock()
	c, err := r.load(id)
	if err != nil {
		return err
	}
	st, err := c.Status()
	if err != nil {
		return fmt.Errorf("sandbox %s: read state: %w", id, err)
	}
	switch st {
	case libcontainer.Paused:
		return nil
	case libcontainer.Running:
		return freeze(ctx, id, func() error { return r.pause(id, c) })
	}
	return fmt.Errorf("sandbox %s is %s, not running; only a running sandbox can be paused: %w", id, st, errdefs.ErrConflict)
}

// pause freezes a running sandbox: in a cgroup v1 freezer (a v2 host has
// none among its paths) with warren's own wait (freezeV1), else, or if
// that does not settle, with libcontainer's.
func (r *Runtime) pause(id string, c *libcontainer.Container) error {
	if f, err := r.factsOf(id); err == nil && f.cgroupPaths["freezer"] != "" {
		frozen, err := freezeV1(f.cgroupPaths["freezer"])
		if err != nil {
			return fmt.Errorf("sandbox %s: %w", id, err)
		}
		if frozen {
			return nil
		}
		r.log.Debug("freeze did not settle; libcontainer tries", "sandbox", id, "waited", freezerWait)
	}
	return c.Pause()
}

// freezeAttempts bounds the retries of a freeze that did not take.
const freezeAttempts = 5

// freeze runs pause, retrying with a growing pause in between: a cgroup v1
// freezer can stay FREEZING while the sandbox's processes fork and exit,
// and libcontainer gives up after its own burst of retries (thawing again),
// which a loaded host sees now and then. A moment later it takes.
func freeze(ctx context.Context, id string, pause func() error) error {
	wait := 20 * time.Millisecond
	var err error
	for i := 0; i < freezeAttempts; i++ {
		if err = pause(); err == nil {
			return nil
		}
		if i == freezeAttempts-1 {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("sandbox %s: freeze: %w (then %w)", id, err, ctx.Err())
		case <-time.After(wait):
		}
		wait *= 2
	}
	return fmt.Errorf("sandbox %s: freeze (%d attempts): %w", id, freezeAttempts, err)
}

// Resume thaws a paused sandbox. Resuming a running sandbox does nothing;
// resuming a stopped one is ErrConflict.
func (r *Runtime) Resume(ctx context.Context, id string) error {
	unlock := r.locks.Lock(id)
	defer unlock()
	c, err := r.load(id)
	if err != nil {
		return err
	}
	st, err := c.Status()
	if err != nil {
		return fmt.Errorf("sandbox %s: read state: %w", id, err)
	}
	switch st {
	case libcontainer.Running:
		return nil
	case libcontainer.Paused:
		if err := c.Resume(); err != nil {
			return fmt.Errorf("sandbox %s: thaw: %w", id, err)
		}
		return nil
	}
	return fmt.Errorf("sandbox %s is %s; only a paused sandbox can be resumed: %w", id, st, errdefs.ErrConflict)
}

// Destroy kills every process of the sandbox, waits (bounded) until they are
// gone and removes its cgroups and state directory. A sandbox whose state is
// half-written (a Start interrupted by a crash) is cleaned up too. Once
// everything is gone the id is unknown: a second Destroy returns
// ErrNotFound and changes nothing.
func (r *Runtime) Destroy(ctx context.Context, id string) error {
	if err := ids.Validate("sandbox id", id); err != nil {
		return err
	}
	unlock := r.locks.Lock(id)
	defer unlock()
	r.forget(id)
	c, err := r.load(id)
	if errdefs.IsNotFound(err) {
		dir := filepath.Join(r.stateDir, id)
		if _, serr := os.Stat(dir); serr != nil {
			// An idmapped root can outlive the state (a start killed
			// between the two): it goes, the answer stays NotFound.
			if uerr := r.roots.remove(id); uerr != nil {
				r.log.Warn("remove idmapped root", "sandbox", id, "err", uerr)
			}
			return err
		}
		r.log.Warn("destroying half-made sandbox (state dir without state)", "sandbox", id)
		if err := r.removeLeftovers(id); err != nil {
			return fmt.Errorf("sandbox %s: remove leftovers: %w", id, err)
		}
		return nil
	}
	if err != nil {
		return err
	}
	defer r.forget(id)
	if err := r.teardown(c); err != nil {
		return fmt.Errorf("sandbox %s: destroy: %w", id, err)
	}
	r.log.Debug("sandbox destroyed", "sandbox", id)
	return nil
}
