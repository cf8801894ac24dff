package gvisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
	"github.com/warrenhq/warren/internal/runtime"
)

// Start writes the sandbox's bundle and runs it (runsc run --detach): it
// returns once PID 1 has started in gVisor. On error nothing is left: no
// process, cgroup, runsc state or bundle.
func (l *lifecycle) Start(ctx context.Context, spec runtime.Spec) (runtime.Status, error) {
	return l.start(ctx, spec, "")
}

// start runs spec's PID 1, or restores the checkpoint in image when set.
func (l *lifecycle) start(ctx context.Context, spec runtime.Spec, image string) (_ runtime.Status, retErr error) {
	if err := ids.Validate("sandbox id", spec.ID); err != nil {
		return runtime.Status{}, err
	}
	if err := validateSpec(spec); err != nil {
		return runtime.Status{}, fmt.Errorf("sandbox %s: %w: %w", spec.ID, err, errdefs.ErrInvalid)
	}
	if err := checkInit(spec); err != nil {
		return runtime.Status{}, fmt.Errorf("sandbox %s: %w: %w", spec.ID, err, errdefs.ErrInvalid)
	}
	if spec.UserNS != nil {
		// gVisor's kernel is the wall; a host user namespace around it is
		// not what this option is for.
		return runtime.Status{}, fmt.Errorf("sandbox %s: host user namespaces are for native sandboxes only: %w", spec.ID, errdefs.ErrUnsupported)
	}
	if err := ctx.Err(); err != nil {
		return runtime.Status{}, fmt.Errorf("sandbox %s: start: %w", spec.ID, err)
	}
	unlock := l.locks.Lock(spec.ID)
	defer unlock()

	bundle := l.bundles.bundle(spec.ID)
	if err := os.Mkdir(bundle, 0o700); errors.Is(err, os.ErrExist) {
		// Not ours to undo: the existing sandbox stays as it is.
		return runtime.Status{}, fmt.Errorf("sandbox %s: %w (destroy it first or pick another id)", spec.ID, errdefs.ErrAlreadyExists)
	} else if err != nil {
		return runtime.Status{}, fmt.Errorf("sandbox %s: make bundle: %w", spec.ID, err)
	}
	defer func() {
		if retErr != nil {
			if err := l.teardown(context.WithoutCancel(ctx), spec.ID); err != nil {
				l.log.Error("sandbox left behind after failed start; Destroy it", "sandbox", spec.ID, "err", err)
			}
		}
	}()
	oci := l.specs.ociSpec(spec)
	if err := applyDevices(oci, spec.Devices); err != nil {
		return runtime.Status{}, fmt.Errorf("sandbox %s: %w", spec.ID, err)
	}
	if err := writeSpec(filepath.Join(bundle, "config.json"), oci); err != nil {
		return runtime.Status{}, fmt.Errorf("sandbox %s: write bundle: %w", spec.ID, err)
	}
	if err := l.bundles.writeLimits(spec.ID, spec.Limits.WithDefaults()); err != nil {
		return runtime.Status{}, fmt.Errorf("sandbox %s: write limits: %w", spec.ID, err)
	}
	if err := l.runsc.runDetached(ctx, bundle, spec, image); err != nil {
		if image != "" {
			return runtime.Status{}, fmt.Errorf("sandbox %s: restore from %s: %w", spec.ID, image, err)
		}
		return runtime.Status{}, fmt.Errorf("sandbox %s: start init %q: %w", spec.ID, spec.Init[0], err)
	}
	if err := l.cgroups.recordCgroups(spec.ID); err != nil {
		return runtime.Status{}, fmt.Errorf("sandbox %s: record its cgroups: %w", spec.ID, err)
	}
	// runsc wrote the sandbox process's pid. PID 1 may already have exited
	// (and the sandbox with it): then nothing is recorded and status asks
	// runsc.
	if pid, err := pidFromFile(filepath.Join(l.bundles.bundle(spec.ID), "pid")); err != nil {
		return runtime.Status{}, fmt.Errorf("sandbox %s: started, but %w", spec.ID, err)
	} else if err := l.bundles.writeProc(spec.ID, pid); err != nil {
		l.log.Debug("sandbox ended as it started", "sandbox", spec.ID, "err", err)
	}
	st, err := l.status(ctx, spec.ID)
	if err != nil {
		return runtime.Status{}, fmt.Errorf("sandbox %s: started, but reading its state failed: %w", spec.ID, err)
	}
	l.log.Debug("sandbox started", "sandbox", spec.ID, "pid", st.InitPID)
	return st, nil
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
