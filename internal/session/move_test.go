package session

import (
	"context"
	"strings"
	"testing"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/store"
)

// TestMoveOutAdoptForget runs a move's three steps on one manager (the
// bundle's copy between nodes is the transfer's, tested there): the source
// refuses a running sandbox unless told to stop it, snapshots a paused one
// at rest, the target's adopt makes it again under the same id, paused and
// marked, and is idempotent; the source's forget leaves no trace.
func TestMoveOutAdoptForget(t *testing.T) {
	ctx := context.Background()
	m, h, st := newManager(t, 10)
	rec, err := m.Create(ctx, CreateRequest{Team: "a", Metadata: map[string]string{"k": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.MoveOut(ctx, rec.ID, false); !errdefs.IsConflict(err) {
		t.Fatalf("move out a running sandbox without stop: %v, want ErrConflict", err)
	}
	if err := m.Pause(ctx, "a", rec.ID); err != nil {
		t.Fatal(err)
	}
	src, snap, err := m.MoveOut(ctx, rec.ID, false)
	if err != nil {
		t.Fatal(err)
	}
	if src.State != StatePaused || snap.Labels[LabelMove] != "true" || snap.SandboxID != rec.ID {
		t.Fatalf("moved out: %+v, snapshot %+v", src, snap)
	}
	if got, _ := m.Get(ctx, "a", rec.ID); got.State != StatePaused {
		t.Fatalf("the source's sandbox is %s after the export, want it paused until forgotten", got.State)
	}

	// The target already holding the id: answered, not made twice; another
	// team's sandbox of that id: refused.
	if got, adopted, err := m.Adopt(ctx, AdoptRequest{Record: src, Snapshot: snap.ID, From: "node-a"}); err != nil || adopted || got.ID != rec.ID {
		t.Fatalf("adopt an id held already: %+v %v %v", got, adopted, err)
	}
	other := src
	other.Team = "b"
	if _, _, err := m.Adopt(ctx, AdoptRequest{Record: other, Snapshot: snap.ID}); !errdefs.IsAlreadyExists(err) {
		t.Fatalf("adopt another team's id: %v, want ErrAlreadyExists", err)
	}

	if err := m.Forget(ctx, rec.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Get(ctx, "a", rec.ID); !errdefs.IsNotFound(err) || h.alive[rec.ID] {
		t.Fatalf("the source still has the sandbox: %v alive=%v", err, h.alive[rec.ID])
	}
	if s, err := st.GetSnapshot(ctx, snap.ID); err == nil && s.State != SnapDeleted {
		t.Fatalf("the move's snapshot is %s after forget, want gone", s.State)
	}

	// As the target: made again from the snapshot under the same id.
	snap2 := takeRestSnapshot(t, m)
	src.ID, src.Family = snap2.SandboxID+"x", snap2.Family
	got, adopted, err := m.Adopt(ctx, AdoptRequest{Record: src, Snapshot: snap2.ID, From: "node-a"})
	if err != nil || !adopted {
		t.Fatalf("adopt: %+v %v %v", got, adopted, err)
	}
	if got.ID != src.ID || got.Team != "a" || got.State != StatePaused || got.Metadata["k"] != "v" ||
		got.Metadata[MetaMovedFrom] != "node-a" || !strings.Contains(got.Reason, "moved from node node-a") || got.MemoryBytes != src.MemoryBytes {
		t.Fatalf("adopted: %+v", got)
	}
	if _, err := m.Resume(ctx, "a", got.ID); err != nil {
		t.Fatalf("resume the adopted sandbox: %v", err)
	}
}

// takeRestSnapshot is a stopped sandbox's snapshot of team a.
func takeRestSnapshot(t *testing.T, m *Manager) store.Snapshot {
	t.Helper()
	ctx := context.Background()
	rec, err := m.Create(ctx, CreateRequest{Team: "a"})
	if err != nil {
		t.Fatal(err)
	}
	_, snap, err := m.MoveOut(ctx, rec.ID, true)
	if err != nil {
		t.Fatal(err)
	}
	return snap
}
