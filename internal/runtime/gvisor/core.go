package gvisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
	"github.com/warrenhq/warren/internal/keylock"
	"github.com/warrenhq/warren/internal/runtime"
)

// core is what every job of the runtime shares: runsc, the bundles, the
// cgroups, one lock per sandbox (held across each runsc command on it), and
// the two steps all of them take: reading a sandbox's state and removing
// everything of it.
type core struct {
	runsc   *runsc
	bundles bundles
	cgroups *cgroups
	locks   keylock.Locks
	log     *slog.Logger
}

// teardownTimeout bounds the runsc commands of a teardown, which ignores
// the caller's context: a half-destroyed sandbox is worse than a late
// answer.
const teardownTimeout = 30 * time.Second

// status reads id's state: from /proc and the bundle for a sandbox whose
// process is recorded (see procRecord), else from runsc. A sandbox without
// a bundle, or whose runsc state is gone (a Start that died half-way), is
// ErrNotFound.
func (c *core) status(ctx context.Context, id string) (runtime.Status, error) {
	if err := ids.Validate("sandbox id", id); err != nil {
		return runtime.Status{}, err
	}
	info, err := os.Stat(filepath.Join(c.bundles.bundle(id), "config.json"))
	if errors.Is(err, os.ErrNotExist) {
		return runtime.Status{}, fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	if err != nil {
		return runtime.Status{}, fmt.Errorf("sandbox %s: %w", id, err)
	}
	out := runtime.Status{ID: id, State: runtime.StateStopped, Created: info.ModTime()}
	if rec, ok := c.bundles.readProc(id); ok {
		if rec.alive() {
			out.State, out.InitPID = runtime.StateRunning, rec.Pid
			if c.bundles.isPaused(id) {
				out.State = runtime.StatePaused
			}
		}
		return out, nil
	}
	// No record of the sandbox process: ask runsc.
	st, err := c.runsc.state(ctx, id)
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

// teardown removes everything of id, in the reverse order of Start: runsc's
// sandbox and state, then any cgroup runsc left, then the bundle (last, so
// that a teardown that fails half-way is found and retried).
func (c *core) teardown(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, teardownTimeout)
	defer cancel()
	dirs, derr := c.cgroups.cgroupDirs(id)
	// delete --force kills the sandbox (paused or not) and removes runsc's
	// state and the cgroups it made; it succeeds when there is no state.
	if _, err := c.runsc.out(ctx, "delete", "--force", id); err != nil && !isNotExist(err) {
		return err
	}
	if derr != nil {
		return fmt.Errorf("find its cgroups: %w", derr)
	}
	if err := removeCgroups(dirs); err != nil {
		return err
	}
	if err := os.RemoveAll(c.bundles.bundle(id)); err != nil {
		return fmt.Errorf("remove bundle: %w", err)
	}
	return nil
}
