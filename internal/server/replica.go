package server

import (
	"context"
	"fmt"
	"net/http"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/session"
	"github.com/warrenhq/warren/internal/store"
)

// Replicas of sandboxes at rest, kept on another node of a fleet against
// the loss of their own (the gateway's controller drives them; see
// internal/session/replica.go). All three routes are for the fleet's
// admin key:
//
//	POST /sandboxes/{id}/replica            the owner snapshots the sandbox
//	POST /sandboxes/{id}/replica/pull       the replica node pulls it ({from, snapshot, team})
//	POST /sandboxes/{id}/restore?snapshot=S&from=NODE
//	                                        the replica node adopts it, its owner lost

// Replicator is what the replica routes need of the session service.
type Replicator interface {
	ReplicaSnapshot(ctx context.Context, id string) (store.Snapshot, error)
	PruneReplicas(ctx context.Context, team, sandboxID string, keep int) error
	AdoptReplica(ctx context.Context, id, snapID, from string) (store.Sandbox, bool, error)
}

var _ Replicator = (*session.Manager)(nil)

type replicaRoutes struct {
	sandboxViews
	replicator Replicator
	snapshots  *snapshotRoutes
}

func (s *replicaRoutes) unsupported(w http.ResponseWriter, r *http.Request) bool {
	if s.replicator == nil {
		writeError(w, r, fmt.Errorf("replicating sandboxes: %w", errdefs.ErrUnsupported))
		return true
	}
	return false
}

// takeReplica (POST /sandboxes/{id}/replica) takes a replica snapshot of
// a sandbox at rest.
func (s *replicaRoutes) takeReplica(w http.ResponseWriter, r *http.Request) {
	if s.unsupported(w, r) {
		return
	}
	snap, err := s.replicator.ReplicaSnapshot(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, snapshotOf(snap))
}

// pullReplica (POST /sandboxes/{id}/replica/pull) pulls a replica
// snapshot from the sandbox's owner and drops the older ones held here.
func (s *replicaRoutes) pullReplica(w http.ResponseWriter, r *http.Request) {
	if s.unsupported(w, r) {
		return
	}
	var dropped string
	snap, created, err := s.snapshots.pullAsked(w, r, &dropped)
	if err == nil && (snap.SandboxID != r.PathValue("id") || snap.Labels[session.LabelReplica] != "true") {
		err = fmt.Errorf("snapshot %s is not a replica of sandbox %s: %w", snap.ID, r.PathValue("id"), errdefs.ErrInvalid)
	}
	if err != nil {
		writeError(w, r, err)
		return
	}
	if err := s.replicator.PruneReplicas(r.Context(), snap.Team, snap.SandboxID, 1); err != nil {
		writeError(w, r, err)
		return
	}
	status := http.StatusCreated
	if !created {
		status = http.StatusOK
	}
	out := snapshotOf(snap)
	out.MemoryDropped = dropped
	writeJSON(w, status, out)
}

// restoreReplica (POST /sandboxes/{id}/restore?snapshot=S&from=NODE)
// makes the sandbox here from its replica snapshot, paused, once its own
// node is lost.
func (s *replicaRoutes) restoreReplica(w http.ResponseWriter, r *http.Request) {
	if s.unsupported(w, r) {
		return
	}
	q := r.URL.Query()
	got, adopted, err := s.replicator.AdoptReplica(r.Context(), r.PathValue("id"), q.Get("snapshot"), q.Get("from"))
	if err != nil {
		writeError(w, r, err)
		return
	}
	status := http.StatusCreated
	if !adopted {
		status = http.StatusOK
	}
	writeJSON(w, status, s.sandboxOf(got))
}
