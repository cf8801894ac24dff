package gvisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/warrenhq/warren/internal/dirsize"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
	"github.com/warrenhq/warren/internal/runtime"
)

// checkpointImage is the file runsc checkpoint writes the kernel's state
// to (beside pages.img, the memory); its presence marks a whole image.
const checkpointImage = "checkpoint.img"

var _ runtime.Checkpointer = (*Runtime)(nil)

// checkpoints saves a sandbox's memory into an image and starts sandboxes
// from one.
type checkpoints struct {
	*core
	starter sandboxStarter
}

// sandboxStarter starts a sandbox, from a checkpoint image when image is
// set (the lifecycle's start).
type sandboxStarter interface {
	start(ctx context.Context, spec runtime.Spec, image string) (runtime.Status, error)
}

// Checkpoint saves the sandbox's kernel — every process, its memory and
// open files — into dir (runsc checkpoint). Without stop the sandbox goes
// on where it was: runsc restores it in place at once (a paused sandbox is
// paused again). With stop its processes end once saved.
//
// The files of the root filesystem are not in the image: a restore needs
// them as they were, so the caller snapshots them with the sandbox paused.
func (c *checkpoints) Checkpoint(ctx context.Context, id, dir string, stop bool) (runtime.CheckpointInfo, error) {
	if err := ids.Validate("sandbox id", id); err != nil {
		return runtime.CheckpointInfo{}, err
	}
	if !filepath.IsAbs(dir) {
		return runtime.CheckpointInfo{}, fmt.Errorf("sandbox %s: checkpoint directory %q must be absolute: %w", id, dir, errdefs.ErrInvalid)
	}
	unlock := c.locks.Lock(id)
	defer unlock()
	st, err := c.status(ctx, id)
	if err != nil {
		return runtime.CheckpointInfo{}, err
	}
	if st.State == runtime.StateStopped {
		return runtime.CheckpointInfo{}, fmt.Errorf("sandbox %s is stopped; only a running or paused sandbox can be checkpointed: %w", id, errdefs.ErrConflict)
	}
	if err := os.Mkdir(dir, 0o700); errors.Is(err, os.ErrExist) {
		return runtime.CheckpointInfo{}, fmt.Errorf("sandbox %s: checkpoint directory %s: %w", id, dir, errdefs.ErrAlreadyExists)
	} else if err != nil {
		return runtime.CheckpointInfo{}, fmt.Errorf("sandbox %s: make checkpoint directory: %w", id, err)
	}
	args := []string{"checkpoint", "--image-path=" + dir}
	if !stop {
		args = append(args, "--leave-running")
	}
	began := time.Now()
	_, err = c.runsc.out(ctx, append(args, id)...)
	took := time.Since(began)
	if err != nil {
		_ = os.RemoveAll(dir)
		if stop {
			// A checkpoint that failed half-way may have stopped it anyway.
			if st, serr := c.status(ctx, id); serr == nil && st.State == runtime.StateStopped {
				return runtime.CheckpointInfo{}, fmt.Errorf("sandbox %s: checkpoint failed and the sandbox stopped: %w", id, err)
			}
		}
		return runtime.CheckpointInfo{}, fmt.Errorf("sandbox %s: checkpoint: %w", id, err)
	}
	if !stop {
		if err := c.afterLeaveRunning(ctx, id, st.State == runtime.StatePaused); err != nil {
			return runtime.CheckpointInfo{}, err
		}
	}
	size, err := dirsize.Of(dir)
	if err != nil {
		return runtime.CheckpointInfo{}, fmt.Errorf("sandbox %s: checkpoint written, but its size: %w", id, err)
	}
	c.log.Debug("sandbox checkpointed", "sandbox", id, "dir", dir, "bytes", size, "took", took, "stop", stop)
	return runtime.CheckpointInfo{Bytes: size, Duration: took}, nil
}

// Restore writes the sandbox's bundle and restores the checkpoint in dir
// into it (runsc restore --detach): gVisor's kernel comes back with every
// process and its memory as they were, over spec's root filesystem.
func (c *checkpoints) Restore(ctx context.Context, spec runtime.Spec, dir string) (runtime.Status, error) {
	if !filepath.IsAbs(dir) {
		return runtime.Status{}, fmt.Errorf("sandbox %s: checkpoint directory %q must be absolute: %w", spec.ID, dir, errdefs.ErrInvalid)
	}
	if _, err := os.Stat(filepath.Join(dir, checkpointImage)); err != nil {
		return runtime.Status{}, fmt.Errorf("sandbox %s: no checkpoint in %s: %w", spec.ID, dir, errdefs.ErrNotFound)
	}
	return c.starter.start(ctx, spec, dir)
}

// afterLeaveRunning puts the record of a sandbox runsc restarted in place
// right: its sandbox process may be a new one, and a sandbox that was
// paused comes back running.
func (c *checkpoints) afterLeaveRunning(ctx context.Context, id string, wasPaused bool) error {
	st, err := c.runsc.state(ctx, id)
	if err != nil {
		return fmt.Errorf("sandbox %s: read state after checkpoint: %w", id, err)
	}
	if st.Pid > 0 {
		if err := c.bundles.writeProc(id, st.Pid); err != nil {
			return fmt.Errorf("sandbox %s: after checkpoint: %w", id, err)
		}
	}
	paused := statusOf(st) == runtime.StatePaused
	if wasPaused && !paused {
		if _, err := c.runsc.out(ctx, "pause", id); err != nil {
			return fmt.Errorf("sandbox %s: pause again after checkpoint: %w", id, err)
		}
		paused = true
	}
	return c.bundles.setPaused(id, paused)
}

// pidFromFile reads a pid file runsc wrote.
func pidFromFile(path string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("pid file %s says %q", path, data)
	}
	return pid, nil
}
