package session

// Moving a sandbox that is not running between the nodes of a fleet. The
// source takes a snapshot of its files (MoveOut) and exports it; the target
// imports it and records the sandbox under the same id (Adopt); the source
// forgets it (Forget) only once the target has it.
//
// On a runtime that saves memory (gvisor) the processes move too: the
// source hibernates a paused (or, asked to stop it, running) sandbox, and
// the move's snapshot keeps the hibernation image (linked, not saved
// again) as its memory image, which the bundle carries. The target puts
// the image back as the sandbox's hibernation image and records it
// hibernated: it holds no memory until a resume restores its processes
// where they were. On other runtimes (native) the files alone move: the
// target holds the sandbox paused, started afresh from its files. The
// record's reason and MetaMovedWith tell the two apart.

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
	"github.com/warrenhq/warren/internal/store"
)

// MetaMovedFrom, in a moved sandbox's metadata, names the node it last
// moved from; MetaMovedWith says what moved: MovedWithMemory (its
// processes, held on disk) or MovedFilesOnly (its files; a resume starts
// its processes afresh), which the record's reason says too.
const (
	MetaMovedFrom   = "warren.dev/moved-from"
	MetaMovedWith   = "warren.dev/moved-with"
	MovedWithMemory = "memory"
	MovedFilesOnly  = "files"
)

// metaStateBeforeMove, in the record a move sends (not kept), is the state
// the sandbox was in before the move hibernated or stopped it.
const metaStateBeforeMove = "warren.dev/state-before-move"

// LabelMove marks the snapshots a move takes, so that Forget finds them.
const LabelMove = "warren.dev/move"

// MoveOut takes the snapshot a move carries and returns the record with
// it. On a runtime that saves memory a paused sandbox is hibernated first
// and the snapshot carries its processes; a running one is hibernated (or,
// elsewhere, stopped) if stop is set, else refused.
func (m *Manager) MoveOut(ctx context.Context, id string, stop bool) (store.Sandbox, store.Snapshot, error) {
	rec, err := m.Lookup(ctx, id)
	if err != nil {
		return store.Sandbox{}, store.Snapshot{}, err
	}
	if err := m.settleForMove(ctx, rec, stop); err != nil {
		return store.Sandbox{}, store.Snapshot{}, err
	}
	was := rec.State
	unlock := m.lockSandbox(id)
	defer unlock()
	if rec, err = m.Get(ctx, rec.Team, id); err != nil {
		return store.Sandbox{}, store.Snapshot{}, err
	}
	if rec.State != was {
		// The record sent says what it was, for the target's reason.
		rec.Metadata = maps.Clone(rec.Metadata)
		if rec.Metadata == nil {
			rec.Metadata = map[string]string{}
		}
		rec.Metadata[metaStateBeforeMove] = string(was)
	}
	res, err := m.snapshotLocked(ctx, rec, SnapshotRequest{Kind: KindNamed, Labels: map[string]string{LabelMove: "true"}, atRest: true})
	if err != nil {
		return store.Sandbox{}, store.Snapshot{}, fmt.Errorf("snapshot sandbox %s to move it: %w", id, err)
	}
	snap := res.Snapshot
	if rec.State == StateHibernated {
		snap.MemoryBytes = m.keepHibernation(ctx, rec, snap.ID)
	}
	return rec, snap, nil
}

// settleForMove brings a sandbox to a state a move takes: hibernated where
// its runtime saves memory (a paused one; a running one if stop), else
// paused or stopped as it is (a running one stopped if stop).
func (m *Manager) settleForMove(ctx context.Context, rec store.Sandbox, stop bool) error {
	id := rec.ID
	switch rec.State {
	case StateHibernated, StateStopped:
		return nil
	case StatePaused, StateRunning:
	default:
		return fmt.Errorf("sandbox %s is %s; only a paused, hibernated, stopped or running sandbox moves: %w", id, rec.State, errdefs.ErrConflict)
	}
	if rec.State == StateRunning && !stop {
		return fmt.Errorf("sandbox %s is running: pause or hibernate it, or ask to stop it (?stop=true: on gvisor its processes are hibernated and move with it, elsewhere its files move alone): %w", id, errdefs.ErrConflict)
	}
	if m.movesMemory(rec.Runtime) {
		_, err := m.hibernate(ctx, rec.Team, id, CauseMove)
		if err == nil {
			return nil
		}
		m.log.Warn("hibernate a sandbox to move it with its memory; moving its files only", "sandbox", id, "err", err)
	}
	if rec.State == StatePaused {
		return nil
	}
	if _, _, err := m.Stop(ctx, rec.Team, id, 0); err != nil {
		return fmt.Errorf("stop sandbox %s to move it: %w", id, err)
	}
	return nil
}

// movesMemory says whether a sandbox on runtimeName moves with its memory
// from or to this node.
func (m *Manager) movesMemory(runtimeName string) bool {
	h := m.transfers.host
	return h != nil && h.CanSaveMemory(runtimeName) == nil
}

// keepHibernation makes a hibernated sandbox's image the memory image of
// the snapshot a move or a replica takes and returns its size; 0 (files
// only) if it cannot.
func (m *Manager) keepHibernation(ctx context.Context, rec store.Sandbox, snapID string) int64 {
	h := m.transfers.host
	if h == nil {
		return 0
	}
	n, err := h.KeepHibernationAsSnapshot(rec.ID, snapID, rec.Runtime)
	if err == nil {
		n = max(n, 1)
		err = m.snapshots.store.SetSnapshotMemory(context.WithoutCancel(ctx), snapID, n)
	}
	if err != nil {
		m.log.Warn("keep a hibernated sandbox's memory with the snapshot that carries it to another node; it carries its files only", "sandbox", rec.ID, "err", err)
		return 0
	}
	return n
}

// AdoptRequest asks a node to take a sandbox moved from another node.
type AdoptRequest struct {
	Record   store.Sandbox // its record on the source node
	Snapshot string        // the imported snapshot of its files
	From     string        // the source node's name, for the record's reason
}

// Adopt records a sandbox moved from another node under its own id, team,
// metadata, limits and lineage: hibernated with its processes held on disk
// when the snapshot carries its memory and a runtime here restores it,
// else started from its files and paused; a connect resumes it here. It is
// idempotent by id: a retry finds the sandbox made by the first call
// (adopted reports whether this call made it); another team's sandbox of
// that id is ErrAlreadyExists.
func (m *Manager) Adopt(ctx context.Context, req AdoptRequest) (rec store.Sandbox, adopted bool, err error) {
	src := req.Record
	if err := ids.Validate("sandbox id", src.ID); err != nil {
		return store.Sandbox{}, false, err
	}
	if have, done, err := m.adoptedBefore(ctx, src); done || err != nil {
		return have, false, err
	}
	withMemory := m.adoptsMemory(ctx, src, req.Snapshot)
	creq := adoptCreateRequest(req, withMemory)
	if _, err := m.Create(ctx, creq); err != nil {
		return store.Sandbox{}, false, fmt.Errorf("adopt sandbox %s: %w", src.ID, err)
	}
	if withMemory {
		m.dropMovedMemory(ctx, req.Snapshot)
	}
	as := string(src.State)
	if before := src.Metadata[metaStateBeforeMove]; before != "" {
		as = fmt.Sprintf("%s (it was %s)", src.State, before)
	}
	state := StateHibernated
	reason := fmt.Sprintf("moved from node %s as %s with its memory: its processes are held on disk and a resume restores them where they were", req.From, as)
	if !withMemory {
		if err := m.pause(ctx, src.Team, src.ID, CauseMove); err != nil {
			return store.Sandbox{}, false, fmt.Errorf("pause adopted sandbox %s: %w", src.ID, err)
		}
		state = StatePaused
		reason = fmt.Sprintf("moved from node %s as %s: its files moved, its processes did not (a resume starts them afresh)", req.From, as)
	}
	bg := context.WithoutCancel(ctx)
	if err := m.lifecycle.store.UpdateSandboxState(bg, src.ID, []store.SandboxState{state}, state, reason); err != nil {
		return store.Sandbox{}, false, err
	}
	rec, err = m.lifecycle.store.GetSandbox(bg, src.ID)
	return rec, true, err
}

// adoptsMemory says whether a moved sandbox is adopted with its processes:
// it was hibernated, its snapshot here has a memory image, and a runtime
// here restores it.
func (m *Manager) adoptsMemory(ctx context.Context, src store.Sandbox, snapID string) bool {
	if src.State != StateHibernated || !m.movesMemory(src.Runtime) {
		return false
	}
	snap, err := m.snapshots.store.GetSnapshot(ctx, snapID)
	if err != nil || snap.MemoryBytes <= 0 {
		return false
	}
	_, ok := m.transfers.host.MemoryImage(snapID)
	return ok
}

// dropMovedMemory leaves the move's snapshot here with its files only once
// the sandbox holds the memory image as its hibernation image: kept, the
// snapshot would hold as much disk as the sandbox's memory after the
// resume has consumed the hibernation image, for a fork back to the
// instant of the move that nobody asked for.
func (m *Manager) dropMovedMemory(ctx context.Context, snapID string) {
	bg := context.WithoutCancel(ctx)
	err := m.snapshots.store.SetSnapshotMemory(bg, snapID, 0)
	if err == nil {
		err = m.transfers.host.DropMemoryImage(snapID)
	}
	if err != nil {
		m.log.Warn("drop the memory image of a move's snapshot", "snapshot", snapID, "err", err)
	}
}

// adoptCreateRequest is the create that makes a moved sandbox here.
func adoptCreateRequest(req AdoptRequest, withMemory bool) CreateRequest {
	src := req.Record
	var timeout time.Duration // 0: never, as a record with no end
	if !src.EndAt.IsZero() {
		timeout = max(time.Until(src.EndAt), time.Minute)
	}
	meta := maps.Clone(src.Metadata)
	if meta == nil {
		meta = map[string]string{}
	}
	delete(meta, metaStateBeforeMove)
	meta[MetaMovedFrom], meta[MetaMovedWith] = req.From, MovedFilesOnly
	if withMemory {
		meta[MetaMovedWith] = MovedWithMemory
	}
	return CreateRequest{
		Team: src.Team, Template: req.Snapshot, Timeout: &timeout, Metadata: meta, Env: src.Env,
		Limits: limitsOf(src), DiskBytes: src.QuotaBytes, AutoPause: src.AutoPause, AutoResume: src.AutoResume,
		PublicPorts: src.PublicPorts, MaskRequestHost: src.MaskRequestHost, ToolSnapshots: src.ToolSnapshots, Network: policyOf(src),
		Runtime: src.Runtime, FilesOnly: !withMemory, hibernated: withMemory, adopted: &src,
	}
}

// adoptedBefore finds what an earlier adopt of src left: a sandbox of
// its team (done: answer it), or a failed one, removed so that this adopt
// makes it again rather than answer a sandbox without files and let the
// source forget the only good copy.
func (m *Manager) adoptedBefore(ctx context.Context, src store.Sandbox) (store.Sandbox, bool, error) {
	have, err := m.lifecycle.store.GetSandbox(ctx, src.ID)
	switch {
	case errdefs.IsNotFound(err):
		return store.Sandbox{}, false, nil
	case err != nil:
		return store.Sandbox{}, false, err
	case have.State == StateDestroyed:
		return store.Sandbox{}, false, nil
	case have.Team != src.Team:
		return store.Sandbox{}, false, fmt.Errorf("sandbox %s exists on this node for another team: %w", src.ID, errdefs.ErrAlreadyExists)
	case have.State == StateFailed:
		if err := m.Delete(ctx, have.Team, have.ID); err != nil {
			return store.Sandbox{}, false, fmt.Errorf("remove the failed adopt of sandbox %s: %w", src.ID, err)
		}
		return store.Sandbox{}, false, nil
	case have.State == StateCreating:
		return store.Sandbox{}, false, fmt.Errorf("sandbox %s is being adopted already; retry when that has ended: %w", src.ID, errdefs.ErrConflict)
	}
	return have, true, nil
}

// keepLineage gives the record of an adopted sandbox the lineage it had on
// its source node, with the moved snapshot as its head.
func keepLineage(rec *store.Sandbox, src *store.Sandbox) {
	if src == nil {
		return
	}
	rec.Family, rec.ForkedFrom, rec.ParentSandbox = src.Family, src.ForkedFrom, src.ParentSandbox
	rec.Turn, rec.CreatedAt, rec.StartedAt = src.Turn, src.CreatedAt, src.StartedAt
}

// Forget destroys a sandbox that has moved to another node, with the
// snapshots its moves took here; the target holds it now.
func (m *Manager) Forget(ctx context.Context, id string) error {
	rec, err := m.Lookup(ctx, id)
	if err != nil {
		return err
	}
	if err := m.Delete(ctx, rec.Team, id); err != nil {
		return err
	}
	snaps, err := m.snapshots.store.ListSnapshots(ctx, store.SnapshotFilter{Team: rec.Team, SandboxID: id, States: []store.SnapshotState{SnapReady}})
	if err != nil {
		return fmt.Errorf("list the snapshots moving sandbox %s took: %w", id, err)
	}
	for _, s := range snaps {
		if s.Labels[LabelMove] != "true" {
			continue
		}
		if err := m.DeleteSnapshot(ctx, rec.Team, s.ID); err != nil && !errdefs.IsNotFound(err) {
			return fmt.Errorf("delete snapshot %s of moved sandbox %s: %w", s.ID, id, err)
		}
	}
	return nil
}
