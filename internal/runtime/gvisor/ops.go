package gvisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
	"github.com/warrenhq/warren/internal/runtime"
)

// lifecycle starts sandboxes, reads their state, pauses and resumes them,
// signals their PID 1 and destroys them.
type lifecycle struct {
	*core
	specs specWriter
}

// List returns the ids of every sandbox with a bundle directory, whatever
// its state (including half-made ones a crashed daemon left; Destroy
// removes them).
func (l *lifecycle) List(ctx context.Context) ([]string, error) {
	entries, err := os.ReadDir(l.bundles.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list sandboxes in %s: %w", l.bundles.dir, err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// Status reports id's current state.
func (l *lifecycle) Status(ctx context.Context, id string) (runtime.Status, error) {
	unlock := l.locks.Lock(id)
	defer unlock()
	return l.status(ctx, id)
}

// Recover reattaches to a sandbox an earlier daemon started. Everything
// needed is in runsc's state and the bundle, so it is Status with a log
// line, after the bundle's paused mark is set right from runsc's state (a
// daemon can die between a runsc pause and the mark).
func (l *lifecycle) Recover(ctx context.Context, id string) (runtime.Status, error) {
	if err := l.syncPaused(ctx, id); err != nil {
		return runtime.Status{}, err
	}
	st, err := l.Status(ctx, id)
	if err != nil {
		return st, err
	}
	l.log.Info("recovered sandbox", "sandbox", id, "state", st.State, "pid", st.InitPID)
	return st, nil
}

// syncPaused sets id's paused mark from runsc's own state.
func (l *lifecycle) syncPaused(ctx context.Context, id string) error {
	unlock := l.locks.Lock(id)
	defer unlock()
	if _, ok := l.bundles.readProc(id); !ok {
		return nil // status asks runsc anyway
	}
	st, err := l.runsc.state(ctx, id)
	if isNotExist(err) {
		return fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("sandbox %s: read state: %w", id, err)
	}
	return l.bundles.setPaused(id, statusOf(st) == runtime.StatePaused)
}

// Pause stops every task in the sandbox's kernel (runsc pause). Pausing a
// paused sandbox does nothing; pausing a stopped one is ErrConflict.
func (l *lifecycle) Pause(ctx context.Context, id string) error {
	unlock := l.locks.Lock(id)
	defer unlock()
	st, err := l.status(ctx, id)
	if err != nil {
		return err
	}
	switch st.State {
	case runtime.StatePaused:
		return nil
	case runtime.StateRunning:
		if _, err := l.runsc.out(ctx, "pause", id); err != nil {
			return l.stoppedMeanwhile(ctx, id, "pause", err)
		}
		return l.bundles.setPaused(id, true)
	}
	return fmt.Errorf("sandbox %s is %s, not running; only a running sandbox can be paused: %w", id, st.State, errdefs.ErrConflict)
}

// Resume restarts a paused sandbox. Resuming a running sandbox does
// nothing; resuming a stopped one is ErrConflict.
func (l *lifecycle) Resume(ctx context.Context, id string) error {
	unlock := l.locks.Lock(id)
	defer unlock()
	st, err := l.status(ctx, id)
	if err != nil {
		return err
	}
	switch st.State {
	case runtime.StateRunning:
		return nil
	case runtime.StatePaused:
		if _, err := l.runsc.out(ctx, "resume", id); err != nil {
			return l.stoppedMeanwhile(ctx, id, "resume", err)
		}
		return l.bundles.setPaused(id, false)
	}
	return fmt.Errorf("sandbox %s is %s; only a paused sandbox can be resumed: %w", id, st.State, errdefs.ErrConflict)
}

// stoppedMeanwhile explains a failed pause or resume: a sandbox whose PID 1
// exited in between is ErrConflict, as if it had been stopped before.
func (l *lifecycle) stoppedMeanwhile(ctx context.Context, id, op string, err error) error {
	if st, serr := l.status(ctx, id); serr == nil && st.State == runtime.StateStopped {
		return fmt.Errorf("sandbox %s stopped; only a running sandbox can %s: %w", id, op, errdefs.ErrConflict)
	}
	return fmt.Errorf("sandbox %s: %s: %w", id, op, err)
}

// Destroy kills the sandbox (runsc delete --force) and removes its cgroups,
// runsc state and bundle. A half-made sandbox is cleaned up too. Once
// everything is gone the id is unknown: a second Destroy returns
// ErrNotFound and changes nothing.
func (l *lifecycle) Destroy(ctx context.Context, id string) error {
	if err := ids.Validate("sandbox id", id); err != nil {
		return err
	}
	unlock := l.locks.Lock(id)
	defer unlock()
	if _, err := os.Stat(l.bundles.bundle(id)); errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	if err := l.teardown(context.WithoutCancel(ctx), id); err != nil {
		return fmt.Errorf("sandbox %s: destroy: %w", id, err)
	}
	l.log.Debug("sandbox destroyed", "sandbox", id)
	return nil
}
