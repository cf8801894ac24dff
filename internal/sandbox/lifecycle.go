package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"connectrpc.com/connect"

	agentv1 "github.com/warrenhq/warren/api/gen/warren/agent/v1"
	"github.com/warrenhq/warren/internal/agentconn"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/network"
	"github.com/warrenhq/warren/internal/procs"
	"github.com/warrenhq/warren/internal/runtime"
	"github.com/warrenhq/warren/internal/sandboxlog"
	"github.com/warrenhq/warren/internal/storage"
)

// lifecycleNetwork is what the lifecycle needs of sandboxes' networks
// (sandboxNetworks).
type lifecycleNetwork interface {
	setupNetwork(ctx context.Context, id string, p network.Policy) error
	teardownNetwork(ctx context.Context, id string) error
	reconcileNetwork(ctx context.Context, keep map[string]bool) error
}

// lifecycle makes sandboxes, reattaches to them after a restart, stops,
// pauses and resumes their processes, and takes them apart again (stop.go
// holds the process states).
type lifecycle struct {
	pool    *volumes
	runtime runtime.Runtime
	launch  *launcher
	sockets agentSockets
	net     lifecycleNetwork
	images  memoryDir
	// writeBacks forgets a destroyed sandbox's write-back ticket.
	writeBacks interface{ forgetWriteBack(id string) }
	procs      *procs.Manager
	logs       *sandboxlog.Logs
	logDir     string
	log        *slog.Logger
}

// Create makes the sandbox's root from its template, starts its processes
// and waits for its agent. On error nothing is left behind.
func (l *lifecycle) Create(ctx context.Context, spec Spec) (_ *Sandbox, retErr error) {
	// Refused before anything is made: an unknown or unavailable runtime.
	if err := l.runtimeAvailable(spec.Runtime); err != nil {
		return nil, err
	}
	var undo cleanups
	queued := time.Now()
	defer func() {
		if retErr != nil {
			undo.run(l.log)
		}
	}()
	// The whole create waits its turn, not only the runtime's start: its
	// quota group and snapshot are CPU too, and a create that holds its
	// slot from the first of them to its agent's answer is what lets the
	// first in line finish first (internal/startgate).
	release, err := l.launch.admit(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	began := time.Now()

	root, err := l.makeRoot(ctx, spec, &undo)
	if err != nil {
		return nil, err
	}
	snapshotted := time.Now()

	sockDir := l.sockets.dir(spec.ID)
	if err := os.MkdirAll(sockDir, 0o700); err != nil {
		return nil, fmt.Errorf("make socket dir: %w", err)
	}
	undo.add("remove socket dir", func(context.Context) error { return os.RemoveAll(sockDir) })
	conn, err := agentconn.Listen(ctx, filepath.Join(sockDir, AgentSocketName), l.log.With("sandbox", spec.ID))
	if err != nil {
		return nil, fmt.Errorf("listen for agent: %w", err)
	}
	undo.add("close agent listener", func(context.Context) error { return conn.Close() })

	if spec.Network != nil {
		if err := l.net.setupNetwork(ctx, spec.ID, *spec.Network); err != nil {
			return nil, err
		}
		undo.add("tear down network", func(ctx context.Context) error { return l.net.teardownNetwork(ctx, spec.ID) })
	}
	if spec.Hibernate {
		return l.createHibernated(spec, conn, &undo)
	}
	if err := l.launch.reserveUserNS(ctx, spec, conn, &undo); err != nil {
		return nil, err
	}
	st, err := l.launch.start(ctx, spec, root, conn)
	if err != nil {
		return nil, err
	}
	undo.add("destroy runtime", func(ctx context.Context) error { return l.runtime.Destroy(ctx, spec.ID) })
	started := time.Now()

	if err := l.sockets.waitReady(ctx, conn); err != nil {
		return nil, err
	}
	release()
	l.joinGroupsCap(ctx, spec.Group)
	l.procs.Attach(spec.ID, conn)
	l.log.Debug("sandbox created", "sandbox", spec.ID,
		"snapshot", snapshotted.Sub(began), "queued", began.Sub(queued), "start", started.Sub(snapshotted), "agent", time.Since(started))
	l.logs.Prepare(spec.ID)
	return &Sandbox{ID: spec.ID, Agent: conn, Status: st}, nil
}

// makeRoot makes a new sandbox's quota group and its root filesystem, a
// snapshot of its template or snapshot, and returns the root's path.
func (l *lifecycle) makeRoot(ctx context.Context, spec Spec, undo *cleanups) (string, error) {
	vol := sandboxKey(spec.ID)
	if spec.QuotaBytes > 0 {
		if err := l.SetQuota(ctx, spec.Group, spec.QuotaBytes); err != nil {
			return "", err
		}
		q := l.pool.st.(storage.QuotaGroups)
		undo.add("delete quota group", func(ctx context.Context) error { return q.DeleteGroup(ctx, spec.Group) })
	}
	src, what := spec.source()
	if spec.Snapshot != "" {
		if err := l.pool.unsettled.snapshot(ctx, spec.Snapshot); err != nil {
			return "", err
		}
	}
	root, err := l.pool.snapshotVolume(ctx, src, vol, storage.SnapshotOptions{Group: spec.Group})
	if err != nil {
		if errdefs.IsNotFound(err) {
			return "", fmt.Errorf("%s %q does not exist (see `warren %s ls`): %w", what, src.Name, what, errdefs.ErrNotFound)
		}
		return "", fmt.Errorf("make root filesystem: %w", err)
	}
	undo.add("delete volume", func(ctx context.Context) error { return l.pool.st.Delete(ctx, vol) })
	return root, nil
}

// runtimeAvailable refuses a runtime this host does not run or cannot
// start now.
func (l *lifecycle) runtimeAvailable(name string) error {
	if c, ok := l.runtime.(runtimeChooser); ok {
		return c.Available(name)
	}
	if name != "" && name != l.runtime.Name() {
		return fmt.Errorf("runtime %q: this server runs %s only: %w", name, l.runtime.Name(), errdefs.ErrInvalid)
	}
	return nil
}

// createHibernated ends a create of a sandbox made hibernated (see
// Spec.Hibernate): its memory image in place, its agent listened for.
func (l *lifecycle) createHibernated(spec Spec, conn *agentconn.Conn, undo *cleanups) (*Sandbox, error) {
	if spec.MemoryFrom == "" {
		return nil, fmt.Errorf("a sandbox created hibernated needs a snapshot with memory: %w", errdefs.ErrInvalid)
	}
	if err := l.images.putHibernationImage(spec.MemoryFrom, spec.ID); err != nil {
		return nil, err
	}
	undo.add("remove hibernation image", func(context.Context) error {
		return removeMemoryImage(l.images.hibernationImage(spec.ID))
	})
	l.procs.Attach(spec.ID, conn)
	l.logs.Prepare(spec.ID)
	return &Sandbox{ID: spec.ID, Agent: conn, Status: runtime.Status{ID: spec.ID, State: runtime.StateStopped}}, nil
}

// Recover reattaches to a sandbox started by an earlier daemon: its
// processes must still be running, and its agent must dial back in.
func (l *lifecycle) Recover(ctx context.Context, id string) (*Sandbox, error) {
	st, err := l.runtime.Recover(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("recover %s: %w", id, err)
	}
	if st.State == runtime.StateStopped {
		return nil, fmt.Errorf("sandbox %s: its processes have exited: %w", id, errdefs.ErrUnavailable)
	}
	conn, err := l.sockets.listen(ctx, id)
	if err != nil {
		return nil, err
	}
	if st.State == runtime.StatePaused {
		// A frozen agent cannot dial; it reconnects once thawed.
		l.procs.Attach(id, conn)
		return &Sandbox{ID: id, Agent: conn, Status: st}, nil
	}
	if err := l.sockets.waitReady(ctx, conn); err != nil {
		conn.Close()
		return nil, err
	}
	l.procs.Attach(id, conn)
	return &Sandbox{ID: id, Agent: conn, Status: st}, nil
}

// Attach listens for the agent of a sandbox that has no processes now (a
// hibernated one, after a daemon restart): it dials in once woken.
func (l *lifecycle) Attach(ctx context.Context, id string) (*Sandbox, error) {
	conn, err := l.sockets.listen(ctx, id)
	if err != nil {
		return nil, err
	}
	l.procs.Attach(id, conn)
	return &Sandbox{ID: id, Agent: conn, Status: runtime.Status{ID: id, State: runtime.StateStopped}}, nil
}

// Alive reports whether the sandbox's processes are still there (running
// or paused).
func (l *lifecycle) Alive(ctx context.Context, id string) (bool, error) {
	return runtime.IsAlive(ctx, l.runtime, id)
}

// Destroy kills the sandbox's processes and removes everything it had. It
// carries on past errors (so that as much as possible is freed) and returns
// them joined. Missing parts are not errors: destroying twice is safe.
func (l *lifecycle) Destroy(ctx context.Context, id string, conn *agentconn.Conn) error {
	ctx = context.WithoutCancel(ctx)
	var errs []error
	if err := l.procs.Remove(id); err != nil {
		errs = append(errs, err)
	}
	if err := l.logs.Remove(id); err != nil {
		errs = append(errs, err)
	}
	if conn != nil {
		if err := conn.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close agent: %w", err))
		}
	}
	if err := l.runtime.Destroy(ctx, id); err != nil && !errdefs.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("destroy processes: %w", err))
	}
	if l.launch.userns != nil {
		// Its processes are gone: the range can go to another sandbox.
		if err := l.launch.userns.Release(ctx, id); err != nil {
			errs = append(errs, err)
		}
	}
	// After the processes: nothing is left to send through it.
	if err := l.net.teardownNetwork(ctx, id); err != nil {
		errs = append(errs, err)
	}
	// A snapshot still being written reads the volume.
	_ = l.pool.unsettled.sandbox(context.WithoutCancel(ctx), id)
	l.writeBacks.forgetWriteBack(id)
	if err := l.pool.st.Delete(ctx, storage.Key{Kind: storage.KindSandbox, Name: id}); err != nil && !errdefs.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("delete root filesystem: %w", err))
	}
	if err := os.RemoveAll(l.sockets.dir(id)); err != nil {
		errs = append(errs, err)
	}
	if l.images != "" {
		if err := removeMemoryImage(l.images.hibernationImage(id)); err != nil {
			errs = append(errs, err)
		}
	}
	if q, ok := l.pool.st.(storage.QuotaGroups); ok {
		// Refused while snapshots of the sandbox remain in the group.
		if err := q.DeleteGroup(ctx, id); err != nil && !errdefs.IsConflict(err) && !errdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete quota group: %w", err))
		}
	}
	if l.logDir != "" {
		if err := os.Remove(filepath.Join(l.logDir, id+".log")); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Reconcile removes every runtime instance, root volume, socket directory
// and scratch volume that belongs to no sandbox in keep. It is run at start,
// after the daemon has recovered what its records name.
func (l *lifecycle) Reconcile(ctx context.Context, keep map[string]bool) error {
	var errs []error
	seen := map[string]bool{}
	runtimeIDs, err := l.runtime.List(ctx)
	if err != nil {
		errs = append(errs, fmt.Errorf("list runtime: %w", err))
	}
	for _, id := range runtimeIDs {
		seen[id] = true
	}
	vols, err := l.pool.st.List(ctx, storage.KindSandbox)
	if err != nil {
		errs = append(errs, fmt.Errorf("list volumes: %w", err))
	}
	for _, v := range vols {
		seen[v.Key.Name] = true
	}
	if entries, err := os.ReadDir(l.sockets.runDir); err == nil {
		for _, e := range entries {
			seen[e.Name()] = true
		}
	}
	for id := range seen {
		if keep[id] {
			continue
		}
		l.log.Info("removing orphaned sandbox resources", "sandbox", id)
		if err := l.Destroy(ctx, id, nil); err != nil {
			errs = append(errs, fmt.Errorf("orphan %s: %w", id, err))
		}
	}
	if err := l.procs.Reconcile(keep); err != nil {
		errs = append(errs, err)
	}
	if err := l.logs.Reconcile(keep); err != nil {
		errs = append(errs, err)
	}
	if err := l.net.reconcileNetwork(ctx, keep); err != nil {
		errs = append(errs, err)
	}
	if err := l.images.reconcile(l.log, nil, keep); err != nil {
		errs = append(errs, err)
	}
	scratch, err := l.pool.st.List(ctx, storage.KindScratch)
	if err != nil {
		errs = append(errs, fmt.Errorf("list scratch volumes: %w", err))
	}
	for _, v := range scratch {
		l.log.Info("removing unfinished build volume", "volume", v.Key.String())
		if err := l.pool.st.Delete(ctx, v.Key); err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// SetEnv replaces the environment variables every later command of a
// running sandbox starts from (those a create gives): a warm-pool sandbox
// is started with none and gets its claimer's.
func (l *lifecycle) SetEnv(ctx context.Context, sb *Sandbox, env map[string]string) error {
	env = withTrustEnv(l.sockets, sb.ID, env)
	if _, err := sb.Agent.Process().SetEnv(ctx, connect.NewRequest(&agentv1.SetEnvRequest{Env: env})); err != nil {
		return fmt.Errorf("set the sandbox's environment: %w", err)
	}
	return nil
}

// SetQuota caps the disk space of a sandbox's quota group (its live volume
// and its snapshots) at bytes.
func (l *lifecycle) SetQuota(ctx context.Context, group string, bytes int64) error {
	q, ok := l.pool.st.(storage.QuotaGroups)
	if !ok || group == "" {
		return fmt.Errorf("the %s storage cannot enforce a disk quota: %w", l.pool.st.Name(), errdefs.ErrUnsupported)
	}
	if err := q.SetGroupLimit(ctx, group, bytes); err != nil {
		return fmt.Errorf("set disk quota: %w", err)
	}
	return nil
}

// joinGroupsCap puts a started sandbox's quota group under the cap on
// all sandboxes together (storage.GroupsCap): only now, so that its start,
// which writes into its new volume, did not need the sandboxes' share of
// the pool. A failure is logged: the daemon's periodic cap puts every
// group under it anyway.
func (l *lifecycle) joinGroupsCap(ctx context.Context, group string) {
	c, ok := l.pool.st.(storage.GroupsCap)
	if !ok || group == "" {
		return
	}
	if err := c.JoinGroupsCap(ctx, group); err != nil && !errdefs.IsUnsupported(err) && !errdefs.IsNotFound(err) {
		l.log.Warn("could not put the sandbox's quota group under the pool's cap yet", "group", group, "err", err)
	}
}

// PrimeFirstCommand runs what a sandbox's first commands will: the default user's login
// shell in the default directory, and a program found through PATH. A new
// sandbox's root is a new btrfs subvolume whose inodes and pages are cold
// (the page cache is not shared with the template), so this takes that cost
// off a pooled sandbox's first real command. The shell alone leaves PATH's
// directories unread (echo and true are its builtins), so an argv command
// also runs: otherwise the claimer's first argv command reads each of them
// cold (its lookup took ~0.05 ms more than the second command's here).
func (l *lifecycle) PrimeFirstCommand(ctx context.Context, sb *Sandbox) error {
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
