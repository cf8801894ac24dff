package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/warrenhq/warren/internal/agentconn"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/runtime"
	"github.com/warrenhq/warren/internal/startgate"
)

// agentSockets is where each sandbox's agent dials in (a socket in the
// sandbox's own run directory) and how long it is given to.
type agentSockets struct {
	runDir string
	// readyTimeout bounds how long a new or recovered sandbox's agent has
	// to connect (0: 10 s).
	readyTimeout time.Duration
	log          *slog.Logger
	// userns: the sandboxes' user namespace ranges, whose root's uid
	// may dial in (nil: none).
	userns UserNSRanges
}

func (a agentSockets) timeout() time.Duration {
	if a.readyTimeout > 0 {
		return a.readyTimeout
	}
	return 10 * time.Second
}

func (a agentSockets) dir(id string) string { return filepath.Join(a.runDir, id) }

// listen makes sandbox id's socket directory and listens there for its
// agent.
func (a agentSockets) listen(ctx context.Context, id string) (*agentconn.Conn, error) {
	sockDir := a.dir(id)
	if err := os.MkdirAll(sockDir, 0o700); err != nil {
		return nil, fmt.Errorf("make socket dir: %w", err)
	}
	conn, err := agentconn.Listen(ctx, filepath.Join(sockDir, AgentSocketName), a.log.With("sandbox", id))
	if err != nil {
		return nil, fmt.Errorf("listen for agent: %w", err)
	}
	if a.userns != nil {
		r, ok, err := a.userns.Lookup(ctx, id)
		if err != nil {
			conn.Close()
			return nil, fmt.Errorf("user namespace of %s: %w", id, err)
		}
		if ok {
			conn.AllowRoot(r.HostID)
		}
	}
	return conn, nil
}

func (a agentSockets) waitReady(ctx context.Context, conn *agentconn.Conn) error {
	ctx, cancel := context.WithTimeout(ctx, a.timeout())
	defer cancel()
	if err := conn.WaitReady(ctx); err != nil {
		return fmt.Errorf("agent did not connect within %s: %w", a.timeout(), errors.Join(err, errdefs.ErrUnavailable))
	}
	return nil
}

// processStarter is what the launcher needs of the runtime; a
// runtimeChooser starts each sandbox on the runtime its spec names.
type processStarter interface {
	Start(ctx context.Context, spec runtime.Spec) (runtime.Status, error)
}

// runtimeChooser is a host runtime that holds several runtimes
// (runtimeset.Set): a sandbox starts on the one its spec names.
type runtimeChooser interface {
	Available(name string) error
	StartOn(ctx context.Context, name string, spec runtime.Spec) (runtime.Status, error)
}

// networkAttacher joins a runtime spec to its sandbox's network
// (sandboxNetworks).
type networkAttacher interface {
	attachNetwork(id string, rs *runtime.Spec) error
}

// imageRestorer starts a sandbox from a memory image (memoryImages).
type imageRestorer interface {
	restore(ctx context.Context, runtimeName string, rs runtime.Spec, dir string) (runtime.Status, error)
}

// launcher starts a sandbox's processes on a root filesystem: what the
// runtime is told to run (the agent as PID 1, its mounts, the network, the
// environment) and the start itself, or the restore of a memory image. A
// create, a rollback and a wake all go through it.
type launcher struct {
	runtime     processStarter
	sockets     agentSockets
	logDir      string
	agentBinary string
	net         networkAttacher
	images      memoryDir
	restorer    imageRestorer
	// noNewPrivileges: see Config.NoNewPrivileges.
	noNewPrivileges func(template string) bool
	// volumeMounts: see Config.VolumeMounts.
	volumeMounts func(ctx context.Context, id string) ([]runtime.Mount, error)
	userns       UserNSRanges
	usernsOn     bool
	// devices: see Config.Devices.
	devices func(ctx context.Context, id string) (*runtime.Devices, error)
	// starts: see Config.Starts.
	starts *startgate.Gate
}

// admit waits for a start slot (Config.Starts). The caller holds it
// through the part of a start that is CPU, until the agent answers: a
// create from before its root's snapshot, a rollback and a boot from the
// runtime's start.
func (l *launcher) admit(ctx context.Context) (release func(), err error) {
	return l.starts.Acquire(ctx)
}

// start starts the sandbox's processes on root, or restores them from the
// memory image spec names. conn (nil: none yet) is the socket its agent
// dials: in a user namespace the agent dials as the range's root, which a
// sandbox that had no range before (made with them off, or by a release
// without them) gets only here, at a rollback or a boot.
func (l *launcher) start(ctx context.Context, spec Spec, root string, conn *agentconn.Conn) (runtime.Status, error) {
	rs, err := l.runtimeSpec(ctx, spec, root)
	if err != nil {
		return runtime.Status{}, err
	}
	if spec.MemoryFrom != "" {
		st, err := l.restorer.restore(ctx, spec.Runtime, rs, l.images.snapshotImage(spec.MemoryFrom))
		if err != nil {
			return runtime.Status{}, fmt.Errorf("restore sandbox from the memory of snapshot %s: %w", spec.MemoryFrom, err)
		}
		return st, nil
	}
	if l.usesUserNS(spec.Runtime) {
		r, err := l.userns.Range(ctx, spec.ID)
		if err != nil {
			return runtime.Status{}, fmt.Errorf("user namespace: %w", err)
		}
		rs.UserNS = &r
		if conn != nil {
			conn.AllowRoot(r.HostID)
		}
	}
	var st runtime.Status
	if c, ok := l.runtime.(runtimeChooser); ok {
		st, err = c.StartOn(ctx, spec.Runtime, rs)
	} else {
		st, err = l.runtime.Start(ctx, rs)
	}
	if err != nil {
		return runtime.Status{}, fmt.Errorf("start sandbox: %w", err)
	}
	return st, nil
}

// usesUserNS says whether a sandbox on the runtime named name ("" the
// default) starts in a user namespace: when they are on and the runtime
// can.
func (l *launcher) usesUserNS(name string) bool {
	if l.userns == nil || !l.usernsOn {
		return false
	}
	if set, ok := l.runtime.(interface {
		CapabilitiesOf(name string) (runtime.Capabilities, bool)
		Name() string
	}); ok {
		if name == "" {
			name = set.Name()
		}
		caps, ok := set.CapabilitiesOf(name)
		return ok && caps.UserNS
	}
	rt, ok := l.runtime.(interface{ Capabilities() runtime.Capabilities })
	return ok && rt.Capabilities().UserNS
}

// reserveUserNS gives a new sandbox that will run in a user namespace its
// range (released by undo) and lets its root's host uid dial conn.
func (l *launcher) reserveUserNS(ctx context.Context, spec Spec, conn *agentconn.Conn, undo *cleanups) error {
	if !l.usesUserNS(spec.Runtime) {
		return nil
	}
	r, err := l.userns.Range(ctx, spec.ID)
	if err != nil {
		return fmt.Errorf("user namespace: %w", err)
	}
	undo.add("release user namespace range", func(ctx context.Context) error { return l.userns.Release(ctx, spec.ID) })
	conn.AllowRoot(r.HostID)
	return nil
}

// runtimeSpec is what the runtime is told to run for spec on root.
func (l *launcher) runtimeSpec(ctx context.Context, spec Spec, root string) (runtime.Spec, error) {
	logPath := ""
	if l.logDir != "" {
		if err := os.MkdirAll(l.logDir, 0o700); err != nil {
			return runtime.Spec{}, fmt.Errorf("make log dir: %w", err)
		}
		logPath = filepath.Join(l.logDir, spec.ID+".log")
	}
	env := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	for k, v := range spec.Env {
		env = append(env, k+"="+v)
	}
	rs := runtime.Spec{
		ID:       spec.ID,
		RootFS:   root,
		Hostname: spec.ID,
		Init:     []string{AgentBinaryPath, "--socket", AgentRunDir + "/" + AgentSocketName},
		Env:      env,
		Cwd:      "/",
		Mounts: []runtime.Mount{
			{Source: l.agentBinary, Destination: AgentBinaryPath, ReadOnly: true},
			{Source: l.sockets.dir(spec.ID), Destination: AgentRunDir, ReadOnly: true},
		},
		Limits:          spec.Limits,
		LogPath:         logPath,
		NoNewPrivileges: l.noNewPrivileges != nil && l.noNewPrivileges(spec.Template),
	}
	if l.volumeMounts != nil {
		// Asked at every start, so a rollback, a wake or a cold boot
		// mounts the same volumes as the create did.
		vols, err := l.volumeMounts(ctx, spec.ID)
		if err != nil {
			return runtime.Spec{}, fmt.Errorf("shared volumes of sandbox %s: %w", spec.ID, err)
		}
		rs.Mounts = append(rs.Mounts, vols...)
	}
	if l.devices != nil {
		d, err := l.devices(ctx, spec.ID)
		if err != nil {
			return runtime.Spec{}, fmt.Errorf("devices of sandbox %s: %w", spec.ID, err)
		}
		rs.Devices = d
	}
	if spec.Network != nil {
		if err := l.net.attachNetwork(spec.ID, &rs); err != nil {
			return runtime.Spec{}, err
		}
	}
	return rs, nil
}
