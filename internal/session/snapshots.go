package session

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/warrenhq/warren/internal/agentconn"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/storage"
	"github.com/warrenhq/warren/internal/store"
)

// snapshots is the snapshot service: snapshots, turns (and their
// pruning), rollback, fork, promote, diff and the snapshots' records.
type snapshots struct {
	*registry
	host    snapshotHost
	store   snapshotStore
	volumes *archiver // the volumes used, restored and dropped
	creator creator   // a fork creates its sandboxes
}

// creator makes a sandbox (the lifecycle's Create).
type creator interface {
	Create(ctx context.Context, req CreateRequest) (store.Sandbox, error)
}

// Snapshot kinds.
const (
	KindNamed    = store.SnapshotKind("named")
	KindTurn     = store.SnapshotKind("turn")
	KindImplicit = store.SnapshotKind("implicit")
)

// Snapshot states.
const (
	SnapCreating = store.SnapshotState("creating")
	SnapReady    = store.SnapshotState("ready")
	SnapDeleted  = store.SnapshotState("deleted")
)

// Lineage edge kinds.
const (
	EdgeSnapshotOf   = store.EdgeKind("snapshot-of")
	EdgeForkedFrom   = store.EdgeKind("forked-from")
	EdgeRolledBackTo = store.EdgeKind("rolled-back-to")
	EdgePromotedFrom = store.EdgeKind("promoted-from")
	EdgeCreatedFrom  = store.EdgeKind("created-from")
)

// SnapshotResult is a snapshot just taken.
type SnapshotResult struct {
	store.Snapshot
	Frozen time.Duration
}

// SnapshotRequest asks for a snapshot of a sandbox.
type SnapshotRequest struct {
	Name   string
	Labels map[string]string
	Kind   store.SnapshotKind
	// Memory saves the sandbox's memory and processes with its files
	// (runtimes that can: gvisor); forks and rollbacks to the snapshot
	// then carry on with the processes as they were.
	Memory bool
	turn   int
	// atRest lets a paused or hibernated sandbox be snapshotted as a
	// stopped one (its tree alone): a move takes its files so.
	atRest bool
}

// Snapshot takes a snapshot of a team's running sandbox.
func (s *snapshots) Snapshot(ctx context.Context, team, id string, req SnapshotRequest) (SnapshotResult, error) {
	if req.Kind == "" {
		req.Kind = KindNamed
	}
	if req.Name != "" {
		if err := ids.ValidateName("snapshot name", req.Name); err != nil {
			return SnapshotResult{}, err
		}
		if store.IsTurnName(req.Name) {
			return SnapshotResult{}, fmt.Errorf("snapshot name %q: names of the form turn-N are kept for turn snapshots (POST /sandboxes/{id}/turns takes one); pick another: %w", req.Name, errdefs.ErrInvalid)
		}
	}
	if err := validateMap("labels", req.Labels); err != nil {
		return SnapshotResult{}, err
	}
	unlock := s.lockSandbox(id)
	defer unlock()
	rec, err := s.Get(ctx, team, id)
	if err != nil {
		return SnapshotResult{}, err
	}
	return s.snapshotLocked(ctx, rec, req)
}

// Turn records the end of an agent turn as snapshot turn-N.
func (s *snapshots) Turn(ctx context.Context, team, id string) (SnapshotResult, error) {
	unlock := s.lockSandbox(id)
	defer unlock()
	rec, err := s.Get(ctx, team, id)
	if err != nil {
		return SnapshotResult{}, err
	}
	return s.turnLocked(ctx, rec)
}

func (s *snapshots) turnLocked(ctx context.Context, rec store.Sandbox) (SnapshotResult, error) {
	if rec.State != StateRunning {
		return SnapshotResult{}, fmt.Errorf("sandbox %s is %s; only a running sandbox can record a turn: %w", rec.ID, rec.State, errdefs.ErrConflict)
	}
	n, err := s.store.NextTurn(ctx, rec.ID)
	if err != nil {
		return SnapshotResult{}, err
	}
	res, err := s.snapshotLocked(ctx, rec, SnapshotRequest{Kind: KindTurn, Name: "turn-" + strconv.Itoa(n), turn: n})
	if err != nil {
		return SnapshotResult{}, err
	}
	s.mu.Lock()
	if sb := s.live[rec.ID]; sb != nil {
		sb.takesTurns = true
	}
	s.mu.Unlock()
	s.pruneTurns(ctx, rec.ID)
	s.volumes.archiveLater(rec.ID)
	return res, nil
}

func (s *snapshots) snapshotLocked(ctx context.Context, rec store.Sandbox, req SnapshotRequest) (SnapshotResult, error) {
	// A stopped sandbox keeps its tree, which can be snapshotted (to fork
	// it, or start a sandbox from it); it has no processes to save.
	stopped := rec.State == StateStopped || (req.atRest && (rec.State == StatePaused || rec.State == StateHibernated))
	if stopped && req.Memory {
		return SnapshotResult{}, fmt.Errorf("sandbox %s is stopped: it has no processes whose memory could be saved (a snapshot of its files works): %w", rec.ID, errdefs.ErrConflict)
	}
	if rec.State != StateRunning && !stopped {
		return SnapshotResult{}, fmt.Errorf("sandbox %s is %s; only a running or stopped sandbox can be snapshotted: %w", rec.ID, rec.State, errdefs.ErrConflict)
	}
	snap := s.newSnapshotRecord(rec, req)
	var agent *agentconn.Conn
	if req.Memory {
		// Refused before anything is recorded: a refused request leaves no
		// tombstone.
		var err error
		if agent, err = s.memoryAgent(rec); err != nil {
			return SnapshotResult{}, err
		}
	}
	began := time.Now()
	if err := s.store.CreateSnapshot(ctx, snap); err != nil {
		if errdefs.IsAlreadyExists(err) && req.Name != "" {
			return SnapshotResult{}, fmt.Errorf("a snapshot named %q exists already; pick another name or delete it: %w", req.Name, errdefs.ErrAlreadyExists)
		}
		return SnapshotResult{}, err
	}
	recorded := time.Now()
	res, err := s.takeSnapshot(ctx, rec, &snap, req.Memory, stopped, agent)
	taken := time.Now()
	if err != nil {
		return SnapshotResult{}, err
	}
	if err := s.recordTaken(context.WithoutCancel(ctx), rec, &snap, res); err != nil {
		return SnapshotResult{}, err
	}
	s.log.Debug("snapshot taken", "sandbox", rec.ID, "snapshot", snap.ID, "kind", snap.Kind,
		"record", recorded.Sub(began), "sync", res.Synced, "frozen", res.Frozen,
		"host", taken.Sub(recorded), "finish", time.Since(taken))
	return SnapshotResult{Snapshot: snap, Frozen: res.Frozen}, nil
}

// newSnapshotRecord is the record, still "creating", of the snapshot req
// asks for of sandbox rec.
func (s *snapshots) newSnapshotRecord(rec store.Sandbox, req SnapshotRequest) store.Snapshot {
	snap := store.Snapshot{
		ID:              ids.New(20),
		Team:            rec.Team,
		SandboxID:       rec.ID,
		Family:          rec.Family,
		Name:            req.Name,
		Kind:            req.Kind,
		Turn:            req.turn,
		ParentID:        rec.Head,
		Template:        rec.Template,
		State:           SnapCreating,
		Labels:          req.Labels,
		ExclusiveBytes:  -1,
		ReferencedBytes: -1,
		CreatedAt:       s.cfg.Now().UTC(),
	}
	if snap.Kind == KindNamed && snap.Name == "" {
		// An unnamed snapshot asked for by a user: nothing to keep unique.
		snap.Kind = KindImplicit
	}
	return snap
}

// memoryAgent is the agent connection a memory snapshot of sandbox rec
// saves the processes through, or why its memory cannot be saved.
func (s *snapshots) memoryAgent(rec store.Sandbox) (*agentconn.Conn, error) {
	if err := s.host.CanSaveMemory(rec.Runtime); err != nil {
		if errdefs.IsUnsupported(err) {
			return nil, noMemoryError(rec)
		}
		return nil, err
	}
	s.mu.Lock()
	sb := s.live[rec.ID]
	s.mu.Unlock()
	if sb == nil {
		return nil, fmt.Errorf("sandbox %s is not attached to this daemon: %w", rec.ID, errdefs.ErrUnavailable)
	}
	return sb.Agent, nil
}

// takeSnapshot has the host take the recorded snapshot snap of sandbox rec
// (with its memory, saved through agent; of its tree alone if stopped). If
// the host fails, the volume and the record go, as a tombstone.
func (s *snapshots) takeSnapshot(ctx context.Context, rec store.Sandbox, snap *store.Snapshot, memory, stopped bool, agent *agentconn.Conn) (sandbox.SnapshotResult, error) {
	var res sandbox.SnapshotResult
	var err error
	if memory {
		res, snap.MemoryBytes, err = s.host.SnapshotMemory(ctx, rec.ID, snap.ID, rec.ID, false, agent)
		if errdefs.IsUnsupported(err) {
			err = noMemoryError(rec)
		}
	} else if stopped {
		res, err = s.host.SnapshotStopped(ctx, rec.ID, snap.ID, rec.ID)
	} else {
		id := snap.ID
		res, err = s.host.Snapshot(ctx, rec.ID, id, rec.ID, func(info storage.Info, err error) { s.snapshotSettled(id, info, err) })
	}
	if err != nil {
		bg := context.WithoutCancel(ctx)
		if derr := s.host.DeleteSnapshot(bg, snap.ID); derr != nil {
			s.log.Warn("remove failed snapshot", "snapshot", snap.ID, "err", derr)
		}
		if uerr := s.store.UpdateSnapshotState(bg, snap.ID, []store.SnapshotState{SnapCreating}, SnapDeleted); uerr != nil {
			s.log.Warn("tombstone failed snapshot", "snapshot", snap.ID, "err", uerr)
		}
		return sandbox.SnapshotResult{}, err
	}
	return res, nil
}

// recordTaken records snapshot snap of sandbox rec as ready, with its
// lineage edge, its sizes (unless the host settles them later) and its
// memory's.
func (s *snapshots) recordTaken(bg context.Context, rec store.Sandbox, snap *store.Snapshot, res sandbox.SnapshotResult) error {
	edge := store.LineageEdge{Family: rec.Family, Kind: EdgeSnapshotOf, From: snap.ID, To: rec.ID, At: s.cfg.Now().UTC()}
	if err := s.store.SnapshotTaken(bg, snap.ID, rec.ID, edge); err != nil {
		return err
	}
	snap.State = SnapReady
	snap.ExclusiveBytes, snap.ReferencedBytes = res.Info.ExclusiveBytes, res.Info.ReferencedBytes
	if !res.Settling { // else snapshotSettled records them
		if err := s.store.SetSnapshotSizes(bg, snap.ID, snap.ExclusiveBytes, snap.ReferencedBytes); err != nil {
			s.log.Warn("record snapshot sizes", "snapshot", snap.ID, "err", err)
		}
	}
	if snap.MemoryBytes > 0 {
		if err := s.store.SetSnapshotMemory(bg, snap.ID, snap.MemoryBytes); err != nil {
			return err
		}
	}
	return nil
}

// noMemoryError refuses a memory snapshot of a sandbox whose runtime
// cannot save memory.
func noMemoryError(rec store.Sandbox) error {
	return fmt.Errorf("sandbox %s runs on the %s runtime, which cannot save memory: memory snapshots need the gvisor runtime (a snapshot without memory works): %w", rec.ID, rec.Runtime, errdefs.ErrInvalid)
}

// snapshotSettled records the outcome of a snapshot answered before it was
// written (sandbox.Host.Snapshot): its sizes, or, if the filesystem failed
// to write it, a tombstone. It must not wait on the snapshot (DeleteSnapshot
// would): the snapshot's waiters are released, but this runs on its call.
func (s *snapshots) snapshotSettled(id string, info storage.Info, err error) {
	ctx := context.Background()
	if err != nil {
		// The answer said taken; the volume is gone with the failed commit.
		if uerr := s.store.UpdateSnapshotState(ctx, id, []store.SnapshotState{SnapCreating, SnapReady}, SnapDeleted); uerr != nil {
			s.log.Warn("tombstone lost snapshot", "snapshot", id, "err", uerr)
		}
		return
	}
	if err := s.store.SetSnapshotSizes(ctx, id, info.ExclusiveBytes, info.ReferencedBytes); err != nil {
		s.log.Warn("record snapshot sizes", "snapshot", id, "err", err)
	}
}

// GetSnapshot returns a team's snapshot (tombstones included).
func (s *snapshots) GetSnapshot(ctx context.Context, team, snapID string) (store.Snapshot, error) {
	if err := ids.Validate("snapshot id", snapID); err != nil {
		return store.Snapshot{}, err
	}
	snap, err := s.store.GetSnapshot(ctx, snapID)
	if err != nil {
		return store.Snapshot{}, err
	}
	if snap.Team != team {
		return store.Snapshot{}, fmt.Errorf("snapshot %s: %w", snapID, errdefs.ErrNotFound)
	}
	return snap, nil
}

// ListSnapshots returns a team's snapshots; by default the usable ones
// (ready and archived: an archived snapshot is restored when used).
func (s *snapshots) ListSnapshots(ctx context.Context, team string, f store.SnapshotFilter) ([]store.Snapshot, error) {
	f.Team = team
	if len(f.States) == 0 {
		f.States = usableStates
	}
	return s.store.ListSnapshots(ctx, f)
}

// DeleteSnapshot deletes a team's snapshot (its volume, or its stream if
// archived). The lineage keeps a tombstone; sandboxes made from it are
// unaffected (btrfs snapshots are independent). An anchor of archived
// snapshots is refused (ErrConflict).
func (s *snapshots) DeleteSnapshot(ctx context.Context, team, snapID string) error {
	snap, err := s.usableSnapshot(ctx, team, snapID)
	if err != nil {
		return err
	}
	return s.volumes.dropSnapshot(ctx, snap.ID)
}

// RollbackOptions qualify a rollback.
type RollbackOptions struct {
	// Force rolls back while commands run (they are killed).
	Force bool
	// FilesOnly takes only the files of a snapshot taken with memory: the
	// processes restart instead of being restored.
	FilesOnly bool
}

// Rollback makes a sandbox's filesystem that of one of its family's
// snapshots and restarts its processes (or, from a snapshot with memory,
// restores them). It refuses while a command runs unless opts.Force.
func (s *snapshots) Rollback(ctx context.Context, team, id, snapID string, opts RollbackOptions) (store.Sandbox, error) {
	unlock := s.lockSandbox(id)
	defer unlock()
	rec, err := s.Get(ctx, team, id)
	if err != nil {
		return store.Sandbox{}, err
	}
	return s.rollbackLocked(ctx, rec, snapID, opts)
}

func (s *snapshots) rollbackLocked(ctx context.Context, rec store.Sandbox, snapID string, opts RollbackOptions) (store.Sandbox, error) {
	if snapID == "" {
		return store.Sandbox{}, fmt.Errorf("snapshotID is missing: %w", errdefs.ErrInvalid)
	}
	snap, err := s.usableSnapshot(ctx, rec.Team, snapID)
	if err != nil {
		return store.Sandbox{}, err
	}
	if snap.Family != rec.Family {
		return store.Sandbox{}, fmt.Errorf("snapshot %s belongs to another sandbox family (%s, not %s); fork it instead: %w", snapID, snap.Family, rec.Family, errdefs.ErrInvalid)
	}
	if rec.State != StateRunning {
		return store.Sandbox{}, fmt.Errorf("sandbox %s is %s; only a running sandbox can be rolled back: %w", rec.ID, rec.State, errdefs.ErrConflict)
	}
	reopen, busy, err := s.closeAdmission(rec.ID, "rolling back", opts.Force)
	if err != nil {
		return store.Sandbox{}, err
	}
	if busy > 0 {
		return store.Sandbox{}, fmt.Errorf("sandbox %s has %d command(s) running; wait for them, or roll back with force (warren rollback --force) to kill them: %w", rec.ID, busy, errdefs.ErrConflict)
	}
	defer reopen()
	s.mu.Lock()
	sb := s.live[rec.ID]
	s.mu.Unlock()
	ctx = context.WithoutCancel(ctx)
	release, err := s.volumes.useSnapshots(ctx, snap)
	if err != nil {
		return store.Sandbox{}, err
	}
	spec := specOf(rec)
	restarted := "processes restarted"
	if snap.MemoryBytes > 0 && !opts.FilesOnly {
		// Checked before the sandbox is touched (and with the snapshot
		// held): a restore that cannot work would otherwise fail after its
		// processes were stopped.
		if err := s.canRestoreMemory(rec, snap); err != nil {
			release()
			return store.Sandbox{}, err
		}
		spec.MemoryFrom = snapID
		restarted = "processes restored from the snapshot's memory"
	}
	s.mu.Lock()
	sb.restarted, sb.restartedTo = time.Now(), snapID
	s.mu.Unlock()
	err = s.host.Rollback(ctx, spec, snapID, sb.Agent)
	release()
	if err != nil {
		s.mu.Lock()
		delete(s.live, rec.ID)
		s.mu.Unlock()
		s.fail(ctx, rec.ID, "rollback failed: "+err.Error())
		_ = s.host.Destroy(ctx, rec.ID, sb.Agent)
		return store.Sandbox{}, fmt.Errorf("rollback of %s failed and the sandbox was stopped: %w", rec.ID, err)
	}
	if err := s.store.SetSandboxHead(ctx, rec.ID, snapID); err != nil {
		s.log.Warn("record sandbox head", "sandbox", rec.ID, "err", err)
	}
	s.edge(ctx, rec.Family, EdgeRolledBackTo, rec.ID, snapID)
	s.event(ctx, rec, "rolled-back", rec.State, rec.State, CauseAPI, "to snapshot "+snapID+"; "+restarted)
	return s.store.GetSandbox(ctx, rec.ID)
}

// canRestoreMemory says whether rec's processes can be restored from
// snap's memory image: the image must be there, saved by the runtime rec
// runs on, and that runtime able to restore it here.
func (s *snapshots) canRestoreMemory(rec store.Sandbox, snap store.Snapshot) error {
	rt, ok := s.host.MemoryImage(snap.ID)
	if !ok {
		return fmt.Errorf("snapshot %s's memory image is missing; roll back its files only (filesOnly): %w", snap.ID, errdefs.ErrNotFound)
	}
	if rt != "" && rec.Runtime != "" && rt != rec.Runtime {
		return fmt.Errorf("snapshot %s holds memory saved by the %s runtime and sandbox %s runs on %s, which cannot restore it; roll back its files only (filesOnly), or fork the snapshot: %w", snap.ID, rt, rec.ID, rec.Runtime, errdefs.ErrInvalid)
	}
	if err := s.host.CanSaveMemory(rec.Runtime); err != nil {
		return fmt.Errorf("sandbox %s cannot have its processes restored (%v); roll back the snapshot's files only (filesOnly): %w", rec.ID, err, errdefs.ErrInvalid)
	}
	return nil
}

// specOf rebuilds what the host needs to (re)start a sandbox from its
// record.
func specOf(rec store.Sandbox) sandbox.Spec {
	return sandbox.Spec{
		ID:         rec.ID,
		Template:   rec.Template,
		Limits:     limitsOf(rec),
		Env:        rec.Env,
		Group:      rec.ID,
		QuotaBytes: rec.QuotaBytes,
		Network:    policyOf(rec),
		Runtime:    rec.Runtime,
	}
}

// ForkRequest asks for new sandboxes from a snapshot or the live state.
type ForkRequest struct {
	SnapshotID string
	Count      int
	Metadata   map[string]string
	Timeout    *time.Duration
	// Memory forks the live state with its memory: the implicit snapshot
	// saves it (gvisor), and every fork carries on with the processes.
	// A SnapshotID taken with memory forks with memory anyway, unless
	// FilesOnly.
	Memory    bool
	FilesOnly bool
	// Devices each fork asks for (none of its parent's).
	Devices []string
}

// ForkResult is one fork: a sandbox or the error that stopped it.
type ForkResult struct {
	Sandbox store.Sandbox
	Err     error
}

// maxForkParallelism bounds how many forks start at once.
const maxForkParallelism = 4

// Fork makes count new running sandboxes from a snapshot of a team's
// sandbox (or from its live state, through an implicit snapshot).
func (s *snapshots) Fork(ctx context.Context, team, id string, req ForkRequest) (string, []ForkResult, error) {
	if req.Count == 0 {
		req.Count = 1
	}
	if req.Count < 0 || req.Count > s.cfg.MaxSandboxes {
		return "", nil, fmt.Errorf("count %d: want 1..%d (the server's sandbox limit): %w", req.Count, s.cfg.MaxSandboxes, errdefs.ErrInvalid)
	}
	if err := validateMap("metadata", req.Metadata); err != nil {
		return "", nil, err
	}
	if req.Timeout != nil {
		// Checked before the implicit snapshot, which a refused timeout
		// would otherwise leave behind.
		if err := s.CheckTimeout(*req.Timeout); err != nil {
			return "", nil, err
		}
	}
	rec, err := s.Get(ctx, team, id)
	if err != nil {
		return "", nil, err
	}
	snapID := req.SnapshotID
	if snapID == "" {
		unlock := s.lockSandbox(id)
		res, err := s.snapshotLocked(ctx, rec, SnapshotRequest{Kind: KindImplicit, Memory: req.Memory})
		unlock()
		if err != nil {
			return "", nil, fmt.Errorf("snapshot the live state to fork it: %w", err)
		}
		snapID = res.ID
	} else {
		snap, err := s.usableSnapshot(ctx, team, snapID)
		if err != nil {
			return "", nil, err
		}
		if snap.Family != rec.Family {
			return "", nil, fmt.Errorf("snapshot %s is not of sandbox %s's family: %w", snapID, id, errdefs.ErrInvalid)
		}
		if req.Memory && snap.MemoryBytes == 0 {
			return "", nil, fmt.Errorf("snapshot %s was taken without memory, so its forks cannot carry on with its processes; drop memory (a fork from its files), or fork the live state with memory: %w", snapID, errdefs.ErrInvalid)
		}
	}
	mounts, err := s.store.SandboxVolumeMounts(ctx, id)
	if err != nil {
		return "", nil, err
	}
	results := make([]ForkResult, req.Count)
	sem := make(chan struct{}, maxForkParallelism)
	done := make(chan struct{})
	for i := range results {
		go func(i int) {
			sem <- struct{}{}
			defer func() { <-sem; done <- struct{}{} }()
			sb, err := s.creator.Create(ctx, CreateRequest{
				Team:            team,
				Template:        snapID,
				Timeout:         req.Timeout,
				Metadata:        req.Metadata,
				Env:             rec.Env,
				Limits:          limitsOf(rec),
				DiskBytes:       rec.QuotaBytes,
				PublicPorts:     rec.PublicPorts,
				MaskRequestHost: rec.MaskRequestHost,
				ToolSnapshots:   rec.ToolSnapshots,
				Network:         policyOf(rec),
				FilesOnly:       req.FilesOnly,
				// A fork mounts its parent's volumes: they are shared,
				// never copied (and a restore from memory needs the
				// same mounts).
				VolumeMounts: mountsByName(mounts),
				Devices:      req.Devices,
			})
			results[i] = ForkResult{Sandbox: sb, Err: err}
		}(i)
	}
	for range results {
		<-done
	}
	return snapID, results, nil
}

// mountsByName is a record's volume mounts as a create asks for them.
func mountsByName(ms []store.VolumeMount) []store.VolumeMount {
	out := make([]store.VolumeMount, len(ms))
	for i, m := range ms {
		out[i] = store.VolumeMount{Name: m.Name, Path: m.Path}
	}
	return out
}

// Promote makes a fork's current tree its parent's new live state. The
// parent keeps its history: its state before the promote is kept as a
// snapshot, whose id is returned with the parent's record.
func (s *snapshots) Promote(ctx context.Context, team, forkID string) (store.Sandbox, string, string, error) {
	fork, err := s.Get(ctx, team, forkID)
	if err != nil {
		return store.Sandbox{}, "", "", err
	}
	if fork.ParentSandbox == "" {
		return store.Sandbox{}, "", "", fmt.Errorf("sandbox %s is not a fork: %w", forkID, errdefs.ErrInvalid)
	}
	parent, err := s.Get(ctx, team, fork.ParentSandbox)
	if err != nil {
		return store.Sandbox{}, "", "", fmt.Errorf("the fork's parent %s: %w", fork.ParentSandbox, err)
	}
	// Checked before the fork's snapshot, which a refused promote would
	// otherwise leave behind (the parent is checked again under its lock).
	for _, sb := range []store.Sandbox{fork, parent} {
		if sb.State != StateRunning {
			return store.Sandbox{}, "", "", fmt.Errorf("sandbox %s is %s; a promote needs the fork and its parent running: %w", sb.ID, sb.State, errdefs.ErrConflict)
		}
	}
	unlockFork := s.lockSandbox(fork.ID)
	fromFork, err := s.snapshotLocked(ctx, fork, SnapshotRequest{Kind: KindImplicit, Labels: map[string]string{"warren.promote": "fork-state"}})
	unlockFork()
	if err != nil {
		return store.Sandbox{}, "", "", fmt.Errorf("snapshot the fork: %w", err)
	}
	unlock := s.lockSandbox(parent.ID)
	defer unlock()
	parent, err = s.Get(ctx, team, parent.ID)
	if err != nil {
		return store.Sandbox{}, "", "", err
	}
	before, err := s.snapshotLocked(ctx, parent, SnapshotRequest{Kind: KindImplicit, Labels: map[string]string{"warren.promote": "previous-state"}})
	if err != nil {
		return store.Sandbox{}, "", "", fmt.Errorf("keep the parent's state: %w", err)
	}
	parent, err = s.Get(ctx, team, parent.ID)
	if err != nil {
		return store.Sandbox{}, "", "", err
	}
	out, err := s.rollbackLocked(ctx, parent, fromFork.ID, RollbackOptions{Force: true})
	if err != nil {
		return store.Sandbox{}, "", "", err
	}
	s.edge(context.WithoutCancel(ctx), parent.Family, EdgePromotedFrom, parent.ID, fork.ID)
	return out, fromFork.ID, before.ID, nil
}

// DiffResult is what differs between two points of a family's history.
type DiffResult struct {
	From, To string
	Changes  []storage.Change
}

// Diff lists the changes from snapshot `from` to snapshot `to`, or to the
// live tree of from's sandbox when to is "live", or of sandbox X when to is
// "live:X" (what a diff's answer names its live side).
func (s *snapshots) Diff(ctx context.Context, team, from, to string) (DiffResult, error) {
	a, err := s.usableSnapshot(ctx, team, from)
	if err != nil {
		return DiffResult{}, err
	}
	liveID, live := strings.CutPrefix(to, "live:")
	if to == "" || to == "live" {
		liveID, live = a.SandboxID, true
	}
	if live {
		if err := ids.Validate("sandbox id", liveID); err != nil {
			return DiffResult{}, err
		}
		rec, err := s.Get(ctx, team, liveID)
		if err != nil {
			return DiffResult{}, fmt.Errorf("the live tree of sandbox %s: %w", liveID, err)
		}
		// Stopped and hibernated sandboxes keep their trees.
		if !slices.Contains([]store.SandboxState{StateRunning, StatePaused, StateHibernated, StateStopped}, rec.State) {
			return DiffResult{}, fmt.Errorf("sandbox %s is %s and has no live tree: %w", rec.ID, rec.State, errdefs.ErrConflict)
		}
		release, err := s.volumes.useSnapshots(ctx, a)
		if err != nil {
			return DiffResult{}, err
		}
		defer release()
		changes, err := s.host.Diff(ctx, a.ID, rec.ID, true)
		return DiffResult{From: a.ID, To: "live:" + rec.ID, Changes: changes}, err
	}
	b, err := s.usableSnapshot(ctx, team, to)
	if err != nil {
		return DiffResult{}, err
	}
	release, err := s.volumes.useSnapshots(ctx, a, b)
	if err != nil {
		return DiffResult{}, err
	}
	defer release()
	changes, err := s.host.Diff(ctx, a.ID, b.ID, false)
	return DiffResult{From: a.ID, To: b.ID, Changes: changes}, err
}

// ReadForDiff reads a small file of a diff's side for a content diff.
func (s *snapshots) ReadForDiff(side string, path string, limit int64) ([]byte, bool, error) {
	if id, ok := strings.CutPrefix(side, "live:"); ok {
		return s.host.ReadVolumeFile(id, true, path, limit)
	}
	// The side was just diffed; keep it in the pool while it is read.
	release, err := s.volumes.useSnapshot(context.Background(), side)
	if err != nil {
		return nil, false, err
	}
	defer release()
	return s.host.ReadVolumeFile(side, false, path, limit)
}

// Lineage is a family's history: its sandboxes, snapshots and the edges
// between them.
type Lineage struct {
	Family    string
	Template  string
	Sandboxes []store.Sandbox
	Snapshots []store.Snapshot
	Edges     []store.LineageEdge
}

// Lineage returns the family history of a team's sandbox.
func (s *snapshots) Lineage(ctx context.Context, team, id string) (Lineage, error) {
	rec, err := s.Get(ctx, team, id)
	if errdefs.IsNotFound(err) {
		// A deleted sandbox's family lives on in its snapshots (and its
		// forks): found through any snapshot it took, tombstones included.
		snaps, lerr := s.store.ListSnapshots(ctx, store.SnapshotFilter{Team: team, SandboxID: id,
			States: []store.SnapshotState{SnapReady, SnapArchived, SnapDeleted}, Limit: 1})
		if lerr == nil && len(snaps) == 1 {
			rec, err = store.Sandbox{Family: snaps[0].Family, Template: snaps[0].Template}, nil
		}
	}
	if err != nil {
		return Lineage{}, err
	}
	l := Lineage{Family: rec.Family, Template: rec.Template}
	if l.Sandboxes, err = s.store.ListSandboxes(ctx, store.SandboxFilter{Team: team, Family: rec.Family}); err != nil {
		return Lineage{}, err
	}
	if l.Snapshots, err = s.store.ListSnapshots(ctx, store.SnapshotFilter{Team: team, Family: rec.Family,
		States: []store.SnapshotState{SnapReady, SnapArchived, SnapDeleted}}); err != nil {
		return Lineage{}, err
	}
	if l.Edges, err = s.store.ListLineage(ctx, rec.Family); err != nil {
		return Lineage{}, err
	}
	return l, nil
}

// DiskUsage reports the bytes charged to a sandbox's quota group and its
// limit, where the storage accounts space.
func (s *snapshots) DiskUsage(ctx context.Context, id string) (used, limit int64, err error) {
	return s.host.GroupUsage(ctx, id)
}

// pruneTurns tombstones a sandbox's oldest turn snapshots (in the pool or
// archived) beyond the configured cap. Named snapshots, implicit ones,
// turns that have forks and anchors of archived turns are kept.
func (s *snapshots) pruneTurns(ctx context.Context, sandboxID string) {
	if s.cfg.MaxTurns <= 0 {
		return
	}
	turns, err := s.store.ListSnapshots(ctx, store.SnapshotFilter{SandboxID: sandboxID,
		Kinds: []store.SnapshotKind{KindTurn}, States: usableStates})
	if err != nil {
		s.log.Warn("list turns to prune", "sandbox", sandboxID, "err", err)
		return
	}
	excess := len(turns) - s.cfg.MaxTurns
	for _, t := range turns { // oldest first
		if excess <= 0 {
			return
		}
		if n, err := s.store.CountForksOf(ctx, t.ID); err != nil || n > 0 {
			continue
		}
		if err := s.volumes.dropSnapshot(ctx, t.ID); err != nil {
			continue
		}
		excess--
	}
}
