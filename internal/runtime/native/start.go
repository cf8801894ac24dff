package native

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/opencontainers/runc/libcontainer"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
	"github.com/warrenhq/warren/internal/runtime"
)

const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// prepared checks spec and gives PID 1 its devices' env: libcontainer's
// Process carries PID 1's env, not the OCI spec the CDI edits go to.
func prepared(spec runtime.Spec) (runtime.Spec, error) {
	if err := ids.Validate("sandbox id", spec.ID); err != nil {
		return spec, err
	}
	if err := validateSpec(spec); err != nil {
		return spec, fmt.Errorf("sandbox %s: %w: %w", spec.ID, err, errdefs.ErrInvalid)
	}
	if spec.Devices != nil {
		env, err := spec.Devices.Env(spec.Env)
		if err != nil {
			return spec, fmt.Errorf("sandbox %s: devices: %w", spec.ID, err)
		}
		spec.Env = env
	}
	return spec, nil
}

// Start creates the sandbox and starts its PID 1. It returns once PID 1 has
// been exec'd (libcontainer's exec fifo has been read); it does not wait for
// PID 1 to do anything. On error nothing is left: no process, cgroup or
// state directory.
func (r *Runtime) Start(ctx context.Context, spec runtime.Spec) (runtime.Status, error) {
	spec, err := prepared(spec)
	if err != nil {
		return runtime.Status{}, err
	}
	if err := ctx.Err(); err != nil {
		return runtime.Status{}, fmt.Errorf("sandbox %s: start: %w", spec.ID, err)
	}
	unlock := r.locks.Lock(spec.ID)
	defer unlock()
	r.forget(spec.ID)

	var ns *os.File
	if spec.UserNS != nil {
		var err error
		if ns, err = openUserNS(*spec.UserNS); err != nil {
			return runtime.Status{}, fmt.Errorf("sandbox %s: %w", spec.ID, err)
		}
		defer ns.Close()
		root, err := r.roots.mount(spec.ID, spec.RootFS, ns)
		if err != nil {
			_ = r.roots.remove(spec.ID)
			return runtime.Status{}, fmt.Errorf("sandbox %s: %w", spec.ID, err)
		}
		spec.RootFS = root
		if spec.NetNS != "" {
			if _, err := r.roots.sysfs(spec.ID, spec.NetNS); err != nil {
				_ = r.roots.remove(spec.ID)
				return runtime.Status{}, fmt.Errorf("sandbox %s: %w", spec.ID, err)
			}
		}
	}
	cfg, err := r.buildConfig(spec)
	if err != nil {
		_ = r.roots.remove(spec.ID)
		return runtime.Status{}, fmt.Errorf("sandbox %s: build container config: %w: %w", spec.ID, err, errdefs.ErrInvalid)
	}
	if ns != nil {
		idmapMountsWith(cfg, ns)
	}
	c, err := libcontainer.Create(r.stateDir, spec.ID, cfg)
	if errors.Is(err, libcontainer.ErrExist) {
		// Not ours to undo (its idmapped root was replaced by the same
		// tree, mounted the same way): the existing sandbox stays as it is.
		return runtime.Status{}, fmt.Errorf("sandbox %s: %w (destroy it first or pick another id)", spec.ID, errdefs.ErrAlreadyExists)
	}
	if err != nil {
		// Create makes the state directory last; nothing else to undo.
		_ = r.roots.remove(spec.ID)
		return runtime.Status{}, fmt.Errorf("sandbox %s: create container: %w", spec.ID, err)
	}

	proc, err := r.bootAndRun(c, spec, bootIDSource(r.stateDir, r.roots, spec))
	if err != nil {
		if cerr := r.teardown(c); cerr != nil {
			r.log.Warn("undo failed start", "sandbox", spec.ID, "err", cerr)
			if lerr := r.removeLeftovers(spec.ID); lerr != nil {
				r.log.Error("sandbox left behind after failed start; Destroy it", "sandbox", spec.ID, "err", lerr)
			}
		}
		return runtime.Status{}, fmt.Errorf("sandbox %s: start init %q: %w", spec.ID, spec.Init[0], err)
	}
	// PID 1 is our child until this process exits: reap it when it exits
	// so it does not linger as a zombie (a zombie init reads as stopped).
	go func() { _, _ = proc.Wait() }()

	st, err := statusOf(c)
	if err != nil {
		return runtime.Status{}, fmt.Errorf("sandbox %s: started, but reading its state failed: %w", spec.ID, err)
	}
	r.log.Debug("sandbox started", "sandbox", spec.ID, "pid", st.InitPID)
	return st, nil
}

// bootAndRun writes the sandbox's new boot id, which its init's hook
// mounts, and starts PID 1.
func (r *Runtime) bootAndRun(c *libcontainer.Container, spec runtime.Spec, bootID string) (*libcontainer.Process, error) {
	if err := writeBootID(bootID); err != nil {
		return nil, fmt.Errorf("write boot id: %w", err)
	}
	return r.run(c, spec)
}

// run starts PID 1 with its stdio on files only: a pipe to this process
// would break (SIGPIPE, blocked writes) when the daemon dies.
func (r *Runtime) run(c *libcontainer.Container, spec runtime.Spec) (*libcontainer.Process, error) {
	stdin, err := os.Open(os.DevNull)
	if err != nil {
		return nil, err
	}
	defer stdin.Close()
	var out *os.File
	if spec.LogPath != "" {
		out, err = os.OpenFile(spec.LogPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
		if err != nil {
			return nil, fmt.Errorf("open log file: %w", err)
		}
	} else {
		out, err = os.OpenFile(os.DevNull, os.O_WRONLY, 0)
		if err != nil {
			return nil, err
		}
	}
	// The child has its own descriptors once started.
	defer out.Close()

	cwd := spec.Cwd
	if cwd == "" {
		cwd = "/"
	}
	proc := &libcontainer.Process{
		Args:   spec.Init,
		Env:    withPath(spec.Env),
		Cwd:    cwd,
		UID:    0,
		GID:    0,
		Stdin:  stdin,
		Stdout: out,
		Stderr: out,
		Init:   true,
	}
	// Run = Start + Exec: returns once PID 1 is exec'd, without waiting on it.
	if err := c.Run(proc); err != nil {
		return nil, err
	}
	return proc, nil
}

// withPath adds a default PATH when env has none, so that a bare command
// name in Init resolves as it would in a login shell.
func withPath(env []string) []string {
	for _, e := range env {
		if strings.HasPrefix(e, "PATH=") {
			return env
		}
	}
	return append(append([]string(nil), env...), defaultPath)
}
