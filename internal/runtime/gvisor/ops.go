package gvisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
	"github.com/warrenhq/warren/internal/runtime"
)

// teardownTimeout bounds the runsc commands of a teardown, which ignores
// the caller's context: a half-destroyed sandbox is worse than a late
// answer.
const teardownTimeout = 30 * time.Second

// status reads id's state: from /proc and the bundle for a sandbox whose
// process is recorded (see procRecord), else from runsc. A sandbox without
// a bundle, or whose runsc state is gone (a Start that died half-way), is
// ErrNotFound.
func (r *Runtime) status(ctx context.Context, id string) (runtime.Status, error) {
	if err := ids.Validate("sandbox id", id); err != nil {
		return runtime.Status{}, err
	}
	info, err := os.Stat(filepath.Join(r.bundle(id), "config.json"))
	if errors.Is(err, os.ErrNotExist) {
		return runtime.Status{}, fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	if err != nil {
		return runtime.Status{}, fmt.Errorf("sandbox %s: %w", id, err)
	}
	out := runtime.Status{ID: id, State: runtime.StateStopped, Created: info.ModTime()}
	if rec, ok := r.readProc(id); ok {
		if rec.alive() {
			out.State, out.InitPID = runtime.StateRunning, rec.Pid
			if r.isPaused(id) {
				out.State = runtime.StatePaused
			}
		}
		return out, nil
	}
	// No record of the sandbox process: ask runsc.
	st, err := r.state(ctx, id)
	if isNotExist(err) {
		return runtime.Status{}, fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	if err != nil {
		return runtime.Status{}, fmt.Errorf("sandbox %s: read state: %w", id, err)
	}
	out.State = statusOf(st)
	if out.State != runtime.StateStopped && st.Pid > 0 {
		// The runsc-sandbox process: gVisor's kernel, which every process
		// of the sandbox lives in.
		out.InitPID = st.Pid
	} else {
		out.State = runtime.StateStopped
	}
	return out, nil
}

// Status reports id's current state.
func (r *Runtime) Status(ctx context.Context, id string) (runtime.Status, error) {
	unlock := r.locks.Lock(id)
	defer unlock()
	return r.status(ctx, id)
}

// Recover reattaches to a sandbox an earlier daemon started. Everything
// needed is in runsc's state and the bundle, so it is Status with a log
// line, after the bundle's paused mark is set right from runsc's state (a
// daemon can die between a runsc pause and the mark).
func (r *Runtime) Recover(ctx context.Context, id string) (runtime.Status, error) {
	if err := r.syncPaused(ctx, id); err != nil {
		return runtime.Status{}, err
	}
	st, err := r.Status(ctx, id)
	if err != nil {
		return st, err
	}
	r.log.Info("recovered sandbox", "sandbox", id, "state", st.State, "pid", st.InitPID)
	return st, nil
}

// syncPaused sets id's paused mark from runsc's own state.
func (r *Runtime) syncPaused(ctx context.Context, id string) error {
	unlock := r.locks.Lock(id)
	defer unlock()
	if _, ok := r.readProc(id); !ok {
		return nil // status asks runsc anyway
	}
	st, err := r.state(ctx, id)
	if isNotExist(err) {
		return fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("sandbox %s: read state: %w", id, err)
	}
	return r.setPaused(id, statusOf(st) == runtime.StatePaused)
}

// Pause stops every task in the sandbox's kernel (runsc pause). Pausing a
// paused sandbox does nothing; pausing a stopped one is ErrConflict.
func (r *Runtime) Pause(ctx context.Context, id string) error {
	unlock := r.locks.Lock(id)
	defer unlock()
	st, err := r.status(ctx, id)
	if err != nil {
		return err
	}
	switch st.State {
	case runtime.StatePaused:
		return nil
	case runtime.StateRunning:
		if _, err := r.runscOut(ctx, "pause", id); err != nil {
			return r.stoppedMeanwhile(ctx, id, "pause", err)
		}
		return r.setPaused(id, true)
	}
	return fmt.Errorf("sandbox %s is %s, not running; only a running sandbox can be paused: %w", id, st.State, errdefs.ErrConflict)
}

// Resume restarts a paused sandbox. Resuming a running sandbox does
// nothing; resuming a stopped one is ErrConflict.
func (r *Runtime) Resume(ctx context.Context, id string) error {
	unlock := r.locks.Lock(id)
	defer unlock()
	st, err := r.status(ctx, id)
	if err != nil {
		return err
	}
	switch st.State {
	case runtime.StateRunning:
		return nil
	case runtime.StatePaused:
		if _, err := r.runscOut(ctx, "resume", id); err != nil {
			return r.stoppedMeanwhile(ctx, id, "resume", err)
		}
		return r.setPaused(id, false)
	}
	return fmt.Errorf("sandbox %s is %s; only a paused sandbox can be resumed: %w", id, st.State, errdefs.ErrConflict)
}

// stoppedMeanwhile explains a failed pause or resume: a sandbox whose PID 1
// exited in between is ErrConflict, as if it had been stopped before.
func (r *Runtime) stoppedMeanwhile(ctx context.Context, id, op string, err error) error {
	if st, serr := r.status(ctx, id); serr == nil && st.State == runtime.StateStopped {
		return fmt.Errorf("sandbox %s stopped; only a running sandbox can %s: %w", id, op, errdefs.ErrConflict)
	}
	return fmt.Errorf("sandbox %s: %s: %w", id, op, err)
}

// Destroy kills the sandbox (runsc delete --force) and removes its cgroups,
// runsc state and bundle. A half-made sandbox is cleaned up too. Once
// everything is gone the id is unknown: a second Destroy returns
// ErrNotFound and changes nothing.
func (r *Runtime) Destroy(ctx context.Context, id string) error {
	if err := ids.Validate("sandbox id", id); err != nil {
		return err
	}
	unlock := r.locks.Lock(id)
	defer unlock()
	if _, err := os.Stat(r.bundle(id)); errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	if err := r.teardown(context.WithoutCancel(ctx), id); err != nil {
		return fmt.Errorf("sandbox %s: destroy: %w", id, err)
	}
	r.log.Debug("sandbox destroyed", "sandbox", id)
	return nil
}

// teardown removes everything of id, in the reverse order of Start: runsc's
// sandbox and state, then any cgroup runsc left, then the bundle (last, so
// that a teardown that fails half-way is found and retried).
func (r *Runtime) teardown(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, teardownTimeout)
	defer cancel()
	dirs, derr := r.cgroupDirs(id)
	// delete --force kills the sandbox (paused or not) and removes runsc's
	// state and the cgroups it made; it succeeds when there is no state.
	if _, err := r.runscOut(ctx, "delete", "--force", id); err != nil && !isNotExist(err) {
		return err
	}
	if derr != nil {
		return fmt.Errorf("find its cgroups: %w", derr)
	}
	if err := removeCgroups(dirs); err != nil {
		return err
	}
	if err := os.RemoveAll(r.bundle(id)); err != nil {
		return fmt.Errorf("remove bundle: %w", err)
	}
	return nil
}
