package session

import (
	"context"
	"testing"

	"github.com/warrenhq/warren/internal/errdefs"
)

// TestReplicaSnapshotAdopt: a sandbox at rest is snapshotted for a
// replica with its record in the labels, the owner keeps the two newest,
// and, the sandbox gone, it is made again from the newest under its id.
func TestReplicaSnapshotAdopt(t *testing.T) {
	ctx := context.Background()
	m, _, _ := newManager(t, 10)
	rec, err := m.Create(ctx, CreateRequest{Team: "a", Metadata: map[string]string{"k": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.ReplicaSnapshot(ctx, rec.ID); !errdefs.IsConflict(err) {
		t.Fatalf("replica of a running sandbox: %v, want ErrConflict", err)
	}
	if err := m.Pause(ctx, "a", rec.ID); err != nil {
		t.Fatal(err)
	}
	var last string
	for range 3 {
		snap, err := m.ReplicaSnapshot(ctx, rec.ID)
		if err != nil {
			t.Fatal(err)
		}
		if snap.Labels[LabelReplica] != "true" || snap.Labels[LabelReplicaRecord] == "" || snap.SandboxID != rec.ID {
			t.Fatalf("replica snapshot %+v", snap)
		}
		last = snap.ID
	}
	held, err := m.ReplicaSnapshots(ctx)
	if err != nil || len(held) != ownerKeepsReplicas {
		t.Fatalf("replica snapshots after three: %d %v, want %d", len(held), err, ownerKeepsReplicas)
	}
	if got, _ := m.Get(ctx, "a", rec.ID); got.State != StatePaused {
		t.Fatalf("the sandbox is %s after its replica snapshots, want paused", got.State)
	}
	if _, _, err := m.AdoptReplica(ctx, "someotherid", last, "node-a"); !errdefs.IsInvalid(err) {
		t.Fatalf("adopt a replica under another id: %v, want ErrInvalid", err)
	}

	if err := m.Delete(ctx, "a", rec.ID); err != nil {
		t.Fatal(err)
	}
	got, adopted, err := m.AdoptReplica(ctx, rec.ID, last, "node-a")
	if err != nil || !adopted {
		t.Fatalf("adopt from the replica: %+v %v %v", got, adopted, err)
	}
	if got.ID != rec.ID || got.Team != "a" || got.State != StatePaused || got.Metadata["k"] != "v" || got.Metadata[MetaMovedFrom] != "node-a" {
		t.Fatalf("restored: %+v", got)
	}
	if _, adopted, err := m.AdoptReplica(ctx, rec.ID, last, "node-a"); err != nil || adopted {
		t.Fatalf("adopt again: adopted %v %v, want the first one's answer", adopted, err)
	}
	if err := m.PruneReplicas(ctx, "a", rec.ID, 0); err != nil {
		t.Fatal(err)
	}
	if held, _ := m.ReplicaSnapshots(ctx); len(held) != 0 {
		t.Fatalf("replica snapshots after pruning all: %d", len(held))
	}
}
