// Package sandbox is the host-side handle to sandboxes: it puts together a
// storage volume (the root filesystem), a runtime instance (the processes)
// and the agent connection, and takes them apart again.
package sandbox

import (
	"connectrpc.com/connect"

	"context"
	"errors"
	"fmt"
	agentv1 "github.com/warrenhq/warren/api/gen/warren/agent/v1"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/warrenhq/warren/internal/agentconn"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/network"
	"github.com/warrenhq/warren/internal/procs"
	"github.com/warrenhq/warren/internal/runtime"
	"github.com/warrenhq/warren/internal/sandboxlog"
	"github.com/warrenhq/warren/internal/storage"
)

// Where the agent lives inside every sandbox. The daemon bind-mounts the
// agent binary and the sandbox's socket directory there, both read-only
// (connecting to a unix socket needs no write access to its mount).
const (
	AgentBinaryPath = "/.warren/bin/warren-agent"
	AgentRunDir     = "/.warren/run"
	AgentSocketName = "agent.sock"
)

// Host creates, recovers and destroys sandboxes on this machine.
type Host struct {
	Storage storage.Storage
	Runtime runtime.Runtime
	RunDir  string // one directory per sandbox, holding its agent socket
	// LogDir, if set, keeps one file per sandbox with PID 1's (the agent's)
	// own output. Only for debugging: root in the sandbox can write to that
	// host file through /proc/1/fd/2, so it is off unless asked for.
	LogDir      string
	AgentBinary string
	// Procs collects the output of each sandbox's background processes
	// (nil: not collected).
	Procs *procs.Manager
	// Logs keeps each sandbox's log (process output and lifecycle).
	Logs *sandboxlog.Logs
	// Network gives sandboxes that ask for one a network (nil: none can).
	Network *Networks
	Log     *slog.Logger
	// ReadyTimeout bounds how long a new or recovered sandbox's agent has
	// to connect.
	ReadyTimeout time.Duration
	// MemoryDir holds the images of sandboxes' memory: those saved with
	// snapshots and those of hibernated sandboxes.
	MemoryDir string

	snapMu     sync.Mutex
	syncs      groupSync
	unsettled  unsettledSnapshots
	writeBacks writeBackTickets
	oldRoots   oldRootDrops
}

// Spec says what sandbox to create.
type Spec struct {
	ID string
	// Template names the template to start from, unless Snapshot is set.
	Template string
	// Snapshot names a snapshot to start from (a fork).
	Snapshot string
	Limits   runtime.Limits
	Env      map[string]string
	// Group is the quota group the sandbox's volumes are charged to ("" =
	// none); QuotaBytes caps it (0 = no cap).
	Group      string
	QuotaBytes int64
	// Network is the sandbox's egress policy: it gets a network namespace
	// on warren's bridge. nil keeps it in a namespace of its own with only
	// loopback (no network at all).
	Network *network.Policy
	// Runtime names the runtime to start it on ("" = the host runtime's
	// default); see runtimeChooser.
	Runtime string
	// MemoryFrom names a snapshot taken with memory: the sandbox's
	// processes are restored from its image instead of started afresh
	// (the runtime must be able to, see runtime.Checkpointer).
	MemoryFrom string
}

// runtimeChooser is a host runtime that holds several runtimes
// (runtimeset.Set): a sandbox starts on the one its spec names.
type runtimeChooser interface {
	Available(name string) error
	StartOn(ctx context.Context, name string, spec runtime.Spec) (runtime.Status, error)
}

func (s Spec) source() (storage.Key, string) {
	if s.Snapshot != "" {
		return snapshotKey(s.Snapshot), "snapshot"
	}
	return storage.Key{Kind: storage.KindTemplate, Name: s.Template}, "template"
}

// Sandbox is one live sandbox as the host holds it.
type Sandbox struct {
	ID     string
	Agent  *agentconn.Conn
	Status runtime.Status
}

func (h *Host) readyTimeout() time.Duration {
	if h.ReadyTimeout > 0 {
		return h.ReadyTimeout
	}
	return 10 * time.Second
}

func (h *Host) socketDir(id string) string { return filepath.Join(h.RunDir, id) }

// Create makes the sandbox's root from its template, starts its processes
// and waits for its agent. On error nothing is left behind.
func (h *Host) Create(ctx context.Context, spec Spec) (_ *Sandbox, retErr error) {
	// Refused before anything is made: an unknown or unavailable runtime.
	if c, ok := h.Runtime.(runtimeChooser); ok {
		if err := c.Available(spec.Runtime); err != nil {
			return nil, err
		}
	} else if spec.Runtime != "" && spec.Runtime != h.Runtime.Name() {
		return nil, fmt.Errorf("runtime %q: this server runs %s only: %w", spec.Runtime, h.Runtime.Name(), errdefs.ErrInvalid)
	}
	var undo cleanups
	began := time.Now()
	defer func() {
		if retErr != nil {
			undo.run(h.Log)
		}
	}()

	vol := sandboxKey(spec.ID)
	if spec.QuotaBytes > 0 {
		if err := h.SetQuota(ctx, spec.Group, spec.QuotaBytes); err != nil {
			return nil, err
		}
		q := h.Storage.(storage.QuotaGroups)
		undo.add("delete quota group", func(ctx context.Context) error { return q.DeleteGroup(ctx, spec.Group) })
	}
	src, what := spec.source()
	if spec.Snapshot != "" {
		if err := h.unsettled.snapshot(ctx, spec.Snapshot); err != nil {
			return nil, err
		}
	}
	root, err := h.snapshotVolume(ctx, src, vol, storage.SnapshotOptions{Group: spec.Group})
	if err != nil {
		if errdefs.IsNotFound(err) {
			return nil, fmt.Errorf("%s %q does not exist (see `warren %s ls`): %w", what, src.Name, what, errdefs.ErrNotFound)
		}
		return nil, fmt.Errorf("make root filesystem: %w", err)
	}
	undo.add("delete volume", func(ctx context.Context) error { return h.Storage.Delete(ctx, vol) })
	snapshotted := time.Now()

	sockDir := h.socketDir(spec.ID)
	if err := os.MkdirAll(sockDir, 0o700); err != nil {
		return nil, fmt.Errorf("make socket dir: %w", err)
	}
	undo.add("remove socket dir", func(context.Context) error { return os.RemoveAll(sockDir) })
	conn, err := agentconn.Listen(ctx, filepath.Join(sockDir, AgentSocketName), h.Log.With("sandbox", spec.ID))
	if err != nil {
		return nil, fmt.Errorf("listen for agent: %w", err)
	}
	undo.add("close agent listener", func(context.Context) error { return conn.Close() })

	if spec.Network != nil {
		if err := h.setupNetwork(ctx, spec.ID, *spec.Network); err != nil {
			return nil, err
		}
		undo.add("tear down network", func(ctx context.Context) error { return h.teardownNetwork(ctx, spec.ID) })
	}
	st, err := h.start(ctx, spec, root)
	if err != nil {
		return nil, err
	}
	undo.add("destroy runtime", func(ctx context.Context) error { return h.Runtime.Destroy(ctx, spec.ID) })
	started := time.Now()

	if err := h.waitReady(ctx, conn); err != nil {
		return nil, err
	}
	h.Procs.Attach(spec.ID, conn)
	h.Log.Debug("sandbox created", "sandbox", spec.ID,
		"snapshot", snapshotted.Sub(began), "start", started.Sub(snapshotted), "agent", time.Since(started))
	h.Logs.Prepare(spec.ID)
	return &Sandbox{ID: spec.ID, Agent: conn, Status: st}, nil
}

// start starts the sandbox's processes on root, or restores them from the
// memory image spec names.
func (h *Host) start(ctx context.Context, spec Spec, root string) (runtime.Status, error) {
	rs, err := h.runtimeSpec(spec, root)
	if err != nil {
		return runtime.Status{}, err
	}
	if spec.MemoryFrom != "" {
		st, err := h.restore(ctx, spec.Runtime, rs, h.snapshotImage(spec.MemoryFrom))
		if err != nil {
			return runtime.Status{}, fmt.Errorf("restore sandbox from the memory of snapshot %s: %w", spec.MemoryFrom, err)
		}
		return st, nil
	}
	var st runtime.Status
	if c, ok := h.Runtime.(runtimeChooser); ok {
		st, err = c.StartOn(ctx, spec.Runtime, rs)
	} else {
		st, err = h.Runtime.Start(ctx, rs)
	}
	if err != nil {
		return runtime.Status{}, fmt.Errorf("start sandbox: %w", err)
	}
	return st, nil
}

// runtimeSpec is what the runtime is told to run for spec on root.
func (h *Host) runtimeSpec(spec Spec, root string) (runtime.Spec, error) {
	logPath := ""
	if h.LogDir != "" {
		if err := os.MkdirAll(h.LogDir, 0o700); err != nil {
			return runtime.Spec{}, fmt.Errorf("make log dir: %w", err)
		}
		logPath = filepath.Join(h.LogDir, spec.ID+".log")
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
			{Source: h.AgentBinary, Destination: AgentBinaryPath, ReadOnly: true},
			{Source: h.socketDir(spec.ID), Destination: AgentRunDir, ReadOnly: true},
		},
		Limits:  spec.Limits,
		LogPath: logPath,
	}
	if spec.Network != nil {
		if err := h.attachNetwork(spec.ID, &rs); err != nil {
			return runtime.Spec{}, err
		}
	}
	return rs, nil
}

func (h *Host) waitReady(ctx context.Context, conn *agentconn.Conn) error {
	ctx, cancel := context.WithTimeout(ctx, h.readyTimeout())
	defer cancel()
	if err := conn.WaitReady(ctx); err != nil {
		return fmt.Errorf("agent did not connect within %s: %w", h.readyTimeout(), errors.Join(err, errdefs.ErrUnavailable))
	}
	return nil
}

// Recover reattaches to a sandbox started by an earlier daemon: its
// processes must still be running, and its agent must dial back in.
func (h *Host) Recover(ctx context.Context, id string) (*Sandbox, error) {
	st, err := h.Runtime.Recover(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("recover %s: %w", id, err)
	}
	if st.State == runtime.StateStopped {
		return nil, fmt.Errorf("sandbox %s: its processes have exited: %w", id, errdefs.ErrUnavailable)
	}
	sockDir := h.socketDir(id)
	if err := os.MkdirAll(sockDir, 0o700); err != nil {
		return nil, fmt.Errorf("make socket dir: %w", err)
	}
	conn, err := agentconn.Listen(ctx, filepath.Join(sockDir, AgentSocketName), h.Log.With("sandbox", id))
	if err != nil {
		return nil, fmt.Errorf("listen for agent: %w", err)
	}
	if st.State == runtime.StatePaused {
		// A frozen agent cannot dial; it reconnects once thawed.
		h.Procs.Attach(id, conn)
		return &Sandbox{ID: id, Agent: conn, Status: st}, nil
	}
	if err := h.waitReady(ctx, conn); err != nil {
		conn.Close()
		return nil, err
	}
	h.Procs.Attach(id, conn)
	return &Sandbox{ID: id, Agent: conn, Status: st}, nil
}

// Attach listens for the agent of a sandbox that has no processes now (a
// hibernated one, after a daemon restart): it dials in once woken.
func (h *Host) Attach(ctx context.Context, id string) (*Sandbox, error) {
	sockDir := h.socketDir(id)
	if err := os.MkdirAll(sockDir, 0o700); err != nil {
		return nil, fmt.Errorf("make socket dir: %w", err)
	}
	conn, err := agentconn.Listen(ctx, filepath.Join(sockDir, AgentSocketName), h.Log.With("sandbox", id))
	if err != nil {
		return nil, fmt.Errorf("listen for agent: %w", err)
	}
	h.Procs.Attach(id, conn)
	return &Sandbox{ID: id, Agent: conn, Status: runtime.Status{ID: id, State: runtime.StateStopped}}, nil
}

// Alive reports whether the sandbox's processes are still there (running
// or paused).
func (h *Host) Alive(ctx context.Context, id string) (bool, error) {
	return runtime.IsAlive(ctx, h.Runtime, id)
}

// Destroy kills the sandbox's processes and removes everything it had. It
// carries on past errors (so that as much as possible is freed) and returns
// them joined. Missing parts are not errors: destroying twice is safe.
func (h *Host) Destroy(ctx context.Context, id string, conn *agentconn.Conn) error {
	ctx = context.WithoutCancel(ctx)
	var errs []error
	if err := h.Procs.Remove(id); err != nil {
		errs = append(errs, err)
	}
	if err := h.Logs.Remove(id); err != nil {
		errs = append(errs, err)
	}
	if conn != nil {
		if err := conn.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close agent: %w", err))
		}
	}
	if err := h.Runtime.Destroy(ctx, id); err != nil && !errdefs.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("destroy processes: %w", err))
	}
	// After the processes: nothing is left to send through it.
	if err := h.teardownNetwork(ctx, id); err != nil {
		errs = append(errs, err)
	}
	// A snapshot still being written reads the volume.
	_ = h.unsettled.sandbox(context.WithoutCancel(ctx), id)
	h.forgetWriteBack(id)
	if err := h.Storage.Delete(ctx, storage.Key{Kind: storage.KindSandbox, Name: id}); err != nil && !errdefs.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("delete root filesystem: %w", err))
	}
	if err := os.RemoveAll(h.socketDir(id)); err != nil {
		errs = append(errs, err)
	}
	if h.MemoryDir != "" {
		if err := removeMemoryImage(h.hibernationImage(id)); err != nil {
			errs = append(errs, err)
		}
	}
	if q, ok := h.Storage.(storage.QuotaGroups); ok {
		// Refused while snapshots of the sandbox remain in the group.
		if err := q.DeleteGroup(ctx, id); err != nil && !errdefs.IsConflict(err) && !errdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete quota group: %w", err))
		}
	}
	if h.LogDir != "" {
		if err := os.Remove(filepath.Join(h.LogDir, id+".log")); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Reconcile removes every runtime instance, root volume, socket directory
// and scratch volume that belongs to no sandbox in keep. It is run at start,
// after the daemon has recovered what its records name.
func (h *Host) Reconcile(ctx context.Context, keep map[string]bool) error {
	var errs []error
	seen := map[string]bool{}
	runtimeIDs, err := h.Runtime.List(ctx)
	if err != nil {
		errs = append(errs, fmt.Errorf("list runtime: %w", err))
	}
	for _, id := range runtimeIDs {
		seen[id] = true
	}
	vols, err := h.Storage.List(ctx, storage.KindSandbox)
	if err != nil {
		errs = append(errs, fmt.Errorf("list volumes: %w", err))
	}
	for _, v := range vols {
		seen[v.Key.Name] = true
	}
	if entries, err := os.ReadDir(h.RunDir); err == nil {
		for _, e := range entries {
			seen[e.Name()] = true
		}
	}
	for id := range seen {
		if keep[id] {
			continue
		}
		h.Log.Info("removing orphaned sandbox resources", "sandbox", id)
		if err := h.Destroy(ctx, id, nil); err != nil {
			errs = append(errs, fmt.Errorf("orphan %s: %w", id, err))
		}
	}
	if err := h.Procs.Reconcile(keep); err != nil {
		errs = append(errs, err)
	}
	if err := h.Logs.Reconcile(keep); err != nil {
		errs = append(errs, err)
	}
	if err := h.reconcileNetwork(ctx, keep); err != nil {
		errs = append(errs, err)
	}
	if err := h.reconcileMemory(nil, keep); err != nil {
		errs = append(errs, err)
	}
	scratch, err := h.Storage.List(ctx, storage.KindScratch)
	if err != nil {
		errs = append(errs, fmt.Errorf("list scratch volumes: %w", err))
	}
	for _, v := range scratch {
		h.Log.Info("removing unfinished build volume", "volume", v.Key.String())
		if err := h.Storage.Delete(ctx, v.Key); err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// SetEnv replaces the environment variables every later command of a
// running sandbox starts from (those a create gives): a warm-pool sandbox
// is started with none and gets its claimer's.
func (h *Host) SetEnv(ctx context.Context, sb *Sandbox, env map[string]string) error {
	if _, err := sb.Agent.Process().SetEnv(ctx, connect.NewRequest(&agentv1.SetEnvRequest{Env: env})); err != nil {
		return fmt.Errorf("set the sandbox's environment: %w", err)
	}
	return nil
}

// SetQuota caps the disk space of a sandbox's quota group (its live volume
// and its snapshots) at bytes.
func (h *Host) SetQuota(ctx context.Context, group string, bytes int64) error {
	q, ok := h.Storage.(storage.QuotaGroups)
	if !ok || group == "" {
		return fmt.Errorf("the %s storage cannot enforce a disk quota: %w", h.Storage.Name(), errdefs.ErrUnsupported)
	}
	if err := q.SetGroupLimit(ctx, group, bytes); err != nil {
		return fmt.Errorf("set disk quota: %w", err)
	}
	return nil
}

// PrimeFirstCommand runs what a sandbox's first commands will: the default user's login
// shell in the default directory, and a program found through PATH. A new
// sandbox's root is a new btrfs subvolume whose inodes and pages are cold
// (the page cache is not shared with the template), so this takes that cost
// off a pooled sandbox's first real command. The shell alone leaves PATH's
// directories unread (echo and true are its builtins), so an argv command
// also runs: otherwise the claimer's first argv command reads each of them
// cold (its lookup took ~0.05 ms more than the second command's here).
func (h *Host) PrimeFirstCommand(ctx context.Context, sb *Sandbox) error {
	for _, req := range []*agentv1.ExecRequest{
		{ShellCommand: "echo warm >/dev/null; true"},
		{Argv: []string{"true"}},
	} {
		if err := warmOne(ctx, sb, req); err != nil {
			return err
		}
	}
	return nil
}

func warmOne(ctx context.Context, sb *Sandbox, req *agentv1.ExecRequest) error {
	stream, err := sb.Agent.Process().Exec(ctx, connect.NewRequest(req))
	if err != nil {
		return err
	}
	defer stream.Close()
	for stream.Receive() {
	}
	return stream.Err()
}
