package session

// Moving a sandbox that is not running between the nodes of a fleet. The
// source takes a snapshot of its files (MoveOut) and exports it; the target
// imports it and records the sandbox under the same id (Adopt); the source
// forgets it (Forget) only once the target has it. Bundles carry files
// only, so the processes of a paused or hibernated sandbox do not move: the
// target holds it paused, started afresh from its files, and says so in
// the record's reason.

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
// moved from: its processes did not move with it (bundles carry files
// only), which the record's reason says too until it is resumed.
const MetaMovedFrom = "warren.dev/moved-from"

// LabelMove marks the snapshots a move takes, so that Forget finds them.
const LabelMove = "warren.dev/move"

// MoveOut takes the snapshot of a sandbox's files a move carries and
// returns the record with it. A running sandbox is stopped first if stop
// is set (its processes cannot move), else refused.
func (m *Manager) MoveOut(ctx context.Context, id string, stop bool) (store.Sandbox, store.Snapshot, error) {
	rec, err := m.Lookup(ctx, id)
	if err != nil {
		return store.Sandbox{}, store.Snapshot{}, err
	}
	switch rec.State {
	case StatePaused, StateHibernated, StateStopped:
	case StateRunning:
		if !stop {
			return store.Sandbox{}, store.Snapshot{}, fmt.Errorf("sandbox %s is running: its processes cannot move; pause or hibernate it, or ask to stop it (?stop=true) and move its files: %w", id, errdefs.ErrConflict)
		}
		if _, _, err := m.Stop(ctx, rec.Team, id, 0); err != nil {
			return store.Sandbox{}, store.Snapshot{}, fmt.Errorf("stop sandbox %s to move it: %w", id, err)
		}
	default:
		return store.Sandbox{}, store.Snapshot{}, fmt.Errorf("sandbox %s is %s; only a paused, hibernated, stopped or running sandbox moves: %w", id, rec.State, errdefs.ErrConflict)
	}
	unlock := m.lockSandbox(id)
	defer unlock()
	if rec, err = m.Get(ctx, rec.Team, id); err != nil {
		return store.Sandbox{}, store.Snapshot{}, err
	}
	res, err := m.snapshotLocked(ctx, rec, SnapshotRequest{Kind: KindNamed, Labels: map[string]string{LabelMove: "true"}, atRest: true})
	if err != nil {
		return store.Sandbox{}, store.Snapshot{}, fmt.Errorf("snapshot sandbox %s to move it: %w", id, err)
	}
	return rec, res.Snapshot, nil
}

// AdoptRequest asks a node to take a sandbox moved from another node.
type AdoptRequest struct {
	Record   store.Sandbox // its record on the source node
	Snapshot string        // the imported snapshot of its files
	From     string        // the source node's name, for the record's reason
}

// Adopt records a sandbox moved from another node under its own id, team,
// metadata, limits and lineage, started from its files and paused, so that
// a connect resumes it here. It is idempotent by id: a retry finds the
// sandbox made by the first call (adopted reports whether this call made
// it); another team's sandbox of that id is ErrAlreadyExists.
func (m *Manager) Adopt(ctx context.Context, req AdoptRequest) (rec store.Sandbox, adopted bool, err error) {
	src := req.Record
	if err := ids.Validate("sandbox id", src.ID); err != nil {
		return store.Sandbox{}, false, err
	}
	if have, done, err := m.adoptedBefore(ctx, src); done || err != nil {
		return have, false, err
	}
	var timeout time.Duration // 0: never, as a record with no end
	if !src.EndAt.IsZero() {
		timeout = max(time.Until(src.EndAt), time.Minute)
	}
	meta := maps.Clone(src.Metadata)
	if meta == nil {
		meta = map[string]string{}
	}
	meta[MetaMovedFrom] = req.From
	creq := CreateRequest{
		Team: src.Team, Template: req.Snapshot, Timeout: &timeout, Metadata: meta, Env: src.Env,
		Limits: limitsOf(src), DiskBytes: src.QuotaBytes, AutoPause: src.AutoPause, AutoResume: src.AutoResume,
		PublicPorts: src.PublicPorts, ToolSnapshots: src.ToolSnapshots, Network: policyOf(src),
		Runtime: src.Runtime, FilesOnly: true, adopted: &src,
	}
	if _, err := m.Create(ctx, creq); err != nil {
		return store.Sandbox{}, false, fmt.Errorf("adopt sandbox %s: %w", src.ID, err)
	}
	if err := m.pause(ctx, src.Team, src.ID, CauseMove); err != nil {
		return store.Sandbox{}, false, fmt.Errorf("pause adopted sandbox %s: %w", src.ID, err)
	}
	reason := fmt.Sprintf("moved from node %s as %s: its files moved, its processes did not (a resume starts them afresh)", req.From, src.State)
	bg := context.WithoutCancel(ctx)
	if err := m.lifecycle.store.UpdateSandboxState(bg, src.ID, []store.SandboxState{StatePaused}, StatePaused, reason); err != nil {
		return store.Sandbox{}, false, err
	}
	rec, err = m.lifecycle.store.GetSandbox(bg, src.ID)
	return rec, true, err
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
