package gvisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
	"github.com/warrenhq/warren/internal/runtime"
)

// Start writes the sandbox's bundle and runs it (runsc run --detach): it
// returns once PID 1 has started in gVisor. On error nothing is left: no
// process, cgroup, runsc state or bundle.
func (r *Runtime) Start(ctx context.Context, spec runtime.Spec) (runtime.Status, error) {
	return r.start(ctx, spec, "")
}

// Restore writes the sandbox's bundle and restores the checkpoint in dir
// into it (runsc restore --detach): gVisor's kernel comes back with every
// process and its memory as they were, over spec's root filesystem.
func (r *Runtime) Restore(ctx context.Context, spec runtime.Spec, dir string) (runtime.Status, error) {
	if !filepath.IsAbs(dir) {
		return runtime.Status{}, fmt.Errorf("sandbox %s: checkpoint directory %q must be absolute: %w", spec.ID, dir, errdefs.ErrInvalid)
	}
	if _, err := os.Stat(filepath.Join(dir, checkpointImage)); err != nil {
		return runtime.Status{}, fmt.Errorf("sandbox %s: no checkpoint in %s: %w", spec.ID, dir, errdefs.ErrNotFound)
	}
	return r.start(ctx, spec, dir)
}

// start runs spec's PID 1, or restores the checkpoint in image when set.
func (r *Runtime) start(ctx context.Context, spec runtime.Spec, image string) (_ runtime.Status, retErr error) {
	if err := ids.Validate("sandbox id", spec.ID); err != nil {
		return runtime.Status{}, err
	}
	if err := validateSpec(spec); err != nil {
		return runtime.Status{}, fmt.Errorf("sandbox %s: %w: %w", spec.ID, err, errdefs.ErrInvalid)
	}
	if err := checkInit(spec); err != nil {
		return runtime.Status{}, fmt.Errorf("sandbox %s: %w: %w", spec.ID, err, errdefs.ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return runtime.Status{}, fmt.Errorf("sandbox %s: start: %w", spec.ID, err)
	}
	unlock := r.locks.Lock(spec.ID)
	defer unlock()

	bundle := r.bundle(spec.ID)
	if err := os.Mkdir(bundle, 0o700); errors.Is(err, os.ErrExist) {
		// Not ours to undo: the existing sandbox stays as it is.
		return runtime.Status{}, fmt.Errorf("sandbox %s: %w (destroy it first or pick another id)", spec.ID, errdefs.ErrAlreadyExists)
	} else if err != nil {
		return runtime.Status{}, fmt.Errorf("sandbox %s: make bundle: %w", spec.ID, err)
	}
	defer func() {
		if retErr != nil {
			if err := r.teardown(context.WithoutCancel(ctx), spec.ID); err != nil {
				r.log.Error("sandbox left behind after failed start; Destroy it", "sandbox", spec.ID, "err", err)
			}
		}
	}()
	if err := writeSpec(filepath.Join(bundle, "config.json"), r.ociSpec(spec)); err != nil {
		return runtime.Status{}, fmt.Errorf("sandbox %s: write bundle: %w", spec.ID, err)
	}
	if err := r.writeLimits(spec.ID, spec.Limits.WithDefaults()); err != nil {
		return runtime.Status{}, fmt.Errorf("sandbox %s: write limits: %w", spec.ID, err)
	}
	if err := r.runDetached(ctx, spec, image); err != nil {
		if image != "" {
			return runtime.Status{}, fmt.Errorf("sandbox %s: restore from %s: %w", spec.ID, image, err)
		}
		return runtime.Status{}, fmt.Errorf("sandbox %s: start init %q: %w", spec.ID, spec.Init[0], err)
	}
	if err := r.recordCgroups(spec.ID); err != nil {
		return runtime.Status{}, fmt.Errorf("sandbox %s: record its cgroups: %w", spec.ID, err)
	}
	// runsc wrote the sandbox process's pid. PID 1 may already have exited
	// (and the sandbox with it): then nothing is recorded and status asks
	// runsc.
	if pid, err := pidFromFile(filepath.Join(r.bundle(spec.ID), "pid")); err != nil {
		return runtime.Status{}, fmt.Errorf("sandbox %s: started, but %w", spec.ID, err)
	} else if err := r.writeProc(spec.ID, pid); err != nil {
		r.log.Debug("sandbox ended as it started", "sandbox", spec.ID, "err", err)
	}
	st, err := r.status(ctx, spec.ID)
	if err != nil {
		return runtime.Status{}, fmt.Errorf("sandbox %s: started, but reading its state failed: %w", spec.ID, err)
	}
	r.log.Debug("sandbox started", "sandbox", spec.ID, "pid", st.InitPID)
	return st, nil
}

// runDetached runs `runsc run --detach`, which returns once the sandbox is
// up and PID 1 has started, or `runsc restore --detach` from image. The sandbox inherits runsc's stdio as PID 1's:
// files only, since a pipe to this process would break (SIGPIPE, blocked
// writes) when the daemon dies. runsc's own errors go to the user's log
// (through stderr) and to runsc.log in the bundle, where they are read back.
func (r *Runtime) runDetached(ctx context.Context, spec runtime.Spec, image string) error {
	stdin, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	defer stdin.Close()
	var out *os.File
	if spec.LogPath != "" {
		// O_APPEND: stdout and stderr share the file, and gVisor writes
		// each at its own offset otherwise.
		out, err = os.OpenFile(spec.LogPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
		if err != nil {
			return fmt.Errorf("open log file: %w", err)
		}
	} else {
		out, err = os.OpenFile(os.DevNull, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
	}
	defer out.Close()

	bundle := r.bundle(spec.ID)
	network := "--network=none"
	if spec.NetNS != "" {
		// gVisor's netstack takes over the interfaces of the namespace
		// named in the spec.
		network = "--network=sandbox"
	}
	verb := []string{"run"}
	if image != "" {
		verb = []string{"restore", "--image-path=" + image}
	}
	args := append(r.baseFlags(), network, "--log="+filepath.Join(bundle, "runsc.log"))
	args = append(args, verb...)
	args = append(args, "--detach", "--bundle="+bundle, "--pid-file="+filepath.Join(bundle, "pid"), spec.ID)
	ctx, cancel := context.WithTimeout(ctx, r.deadline(longCallTimeout, r.longCallTimeout))
	defer cancel()
	cmd := exec.CommandContext(ctx, r.runsc, args...)
	cmd.WaitDelay = waitDelay
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, out, out
	cmd.Dir = bundle
	if err := cmd.Run(); err != nil {
		if msg := runscLogError(bundle); msg != "" {
			return &runscError{args: verb[:1], msg: msg, err: err}
		}
		return &runscError{args: verb[:1], err: err}
	}
	return nil
}

// statusOf maps runsc's states onto ours. "created" (the sandbox is up but
// PID 1 never started) only survives a daemon that died inside Start, so it
// reads as stopped and the daemon destroys it.
func statusOf(st ociState) runtime.State {
	switch strings.ToLower(st.Status) {
	case "running":
		return runtime.StateRunning
	case "paused":
		return runtime.StatePaused
	}
	return runtime.StateStopped
}
