package session

// Replicas: copies of a sandbox at rest kept on another node of a fleet,
// so that the sandbox outlives the loss of its own node. The owner takes a
// snapshot of the sandbox's files labelled as a replica, with the
// sandbox's record in another label (labels travel with a snapshot's
// bundle, so the copy needs nothing beside it); the replica node pulls it
// and keeps the newest only; once the owner is lost, the replica node
// adopts the sandbox from it under its id, as a move's target does.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
	"github.com/warrenhq/warren/internal/store"
)

// Labels of a replica snapshot: LabelReplica marks it, LabelReplicaRecord
// holds the JSON of the sandbox's record when it was taken.
const (
	LabelReplica       = "warren.dev/replica"
	LabelReplicaRecord = "warren.dev/replica-record"
)

// ownerKeepsReplicas is how many replica snapshots of a sandbox its owner
// keeps: the newest, and the one before it, which the replica node holds
// and the newest is sent as a delta against.
const ownerKeepsReplicas = 2

// ReplicaSnapshot takes a replica snapshot of a paused, hibernated or
// stopped sandbox (its files and record; a hibernated one's memory image
// too, where its runtime saves memory) and prunes the older ones.
func (m *Manager) ReplicaSnapshot(ctx context.Context, id string) (store.Snapshot, error) {
	rec, err := m.Lookup(ctx, id)
	if err != nil {
		return store.Snapshot{}, err
	}
	unlock := m.lockSandbox(id)
	defer unlock()
	if rec, err = m.Get(ctx, rec.Team, id); err != nil {
		return store.Snapshot{}, err
	}
	switch rec.State {
	case StatePaused, StateHibernated, StateStopped:
	default:
		return store.Snapshot{}, fmt.Errorf("sandbox %s is %s; only a paused, hibernated or stopped sandbox is replicated (its files are at rest): %w", id, rec.State, errdefs.ErrConflict)
	}
	raw, err := json.Marshal(rec)
	if err != nil {
		return store.Snapshot{}, fmt.Errorf("encode the record of sandbox %s: %w", id, err)
	}
	labels := map[string]string{LabelReplica: "true", LabelReplicaRecord: string(raw)}
	res, err := m.snapshotLocked(ctx, rec, SnapshotRequest{Kind: KindNamed, Labels: labels, atRest: true})
	if err != nil {
		return store.Snapshot{}, fmt.Errorf("snapshot sandbox %s to replicate it: %w", id, err)
	}
	if rec.State == StateHibernated {
		// The copy carries the processes too, so that a restore elsewhere
		// wakes them where they were (a link, not a second image).
		res.Snapshot.MemoryBytes = m.keepHibernation(ctx, rec, res.Snapshot.ID)
	}
	if err := m.PruneReplicas(ctx, rec.Team, id, ownerKeepsReplicas); err != nil {
		m.log.Warn("prune the older replica snapshots of a sandbox", "sandbox", id, "err", err)
	}
	return res.Snapshot, nil
}

// PruneReplicas deletes the replica snapshots of a team's sandbox but the
// keep newest.
func (m *Manager) PruneReplicas(ctx context.Context, team, sandboxID string, keep int) error {
	snaps, err := m.snapshots.store.ListSnapshots(ctx, store.SnapshotFilter{Team: team, SandboxID: sandboxID, States: []store.SnapshotState{SnapReady}})
	if err != nil {
		return fmt.Errorf("list the snapshots of sandbox %s: %w", sandboxID, err)
	}
	snaps = slices.DeleteFunc(snaps, func(s store.Snapshot) bool { return s.Labels[LabelReplica] != "true" })
	slices.SortFunc(snaps, func(a, b store.Snapshot) int { return b.CreatedAt.Compare(a.CreatedAt) })
	for _, s := range snaps[min(keep, len(snaps)):] {
		if err := m.DeleteSnapshot(ctx, team, s.ID); err != nil && !errdefs.IsNotFound(err) {
			return fmt.Errorf("delete replica snapshot %s of sandbox %s: %w", s.ID, sandboxID, err)
		}
	}
	return nil
}

// AdoptReplica makes a sandbox lost with its node from the replica
// snapshot snapID this node holds: its own id, team, limits, metadata and
// lineage, paused, so that a connect resumes it (Adopt). id is the
// sandbox the caller means; from names the lost node.
func (m *Manager) AdoptReplica(ctx context.Context, id, snapID, from string) (store.Sandbox, bool, error) {
	if err := ids.Validate("snapshot id", snapID); err != nil {
		return store.Sandbox{}, false, err
	}
	snap, err := m.snapshots.store.GetSnapshot(ctx, snapID)
	if err != nil {
		return store.Sandbox{}, false, fmt.Errorf("replica snapshot %s: %w", snapID, err)
	}
	rec, err := replicaRecord(snap)
	if err != nil {
		return store.Sandbox{}, false, err
	}
	if rec.ID != id {
		return store.Sandbox{}, false, fmt.Errorf("snapshot %s is a replica of sandbox %s, not %s: %w", snapID, rec.ID, id, errdefs.ErrInvalid)
	}
	return m.Adopt(ctx, AdoptRequest{Record: rec, Snapshot: snap.ID, From: from})
}

// replicaRecord is the sandbox record a replica snapshot carries.
func replicaRecord(snap store.Snapshot) (store.Sandbox, error) {
	if snap.Labels[LabelReplica] != "true" || (snap.State != SnapReady && snap.State != SnapArchived) {
		return store.Sandbox{}, fmt.Errorf("snapshot %s is not a ready replica of a sandbox: %w", snap.ID, errdefs.ErrNotFound)
	}
	var rec store.Sandbox
	if err := json.Unmarshal([]byte(snap.Labels[LabelReplicaRecord]), &rec); err != nil || rec.ID == "" {
		return store.Sandbox{}, fmt.Errorf("replica snapshot %s holds no readable sandbox record: %w", snap.ID, errdefs.ErrInvalid)
	}
	if rec.ID != snap.SandboxID || rec.Team != snap.Team {
		return store.Sandbox{}, fmt.Errorf("replica snapshot %s of sandbox %s (team %s) holds the record of sandbox %s (team %s): %w",
			snap.ID, snap.SandboxID, snap.Team, rec.ID, rec.Team, errdefs.ErrInvalid)
	}
	return rec, nil
}

// ReplicaSnapshots lists the ready replica snapshots this node holds, of
// every team: its own sandboxes' and the copies it keeps for other nodes.
func (m *Manager) ReplicaSnapshots(ctx context.Context) ([]store.Snapshot, error) {
	snaps, err := m.snapshots.store.ListSnapshots(ctx, store.SnapshotFilter{States: []store.SnapshotState{SnapReady}, Kinds: []store.SnapshotKind{KindImplicit}})
	if err != nil {
		return nil, fmt.Errorf("list the replica snapshots: %w", err)
	}
	return slices.DeleteFunc(snaps, func(s store.Snapshot) bool { return s.Labels[LabelReplica] != "true" }), nil
}
