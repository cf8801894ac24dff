package session

import (
	"context"
	"errors"
	"testing"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/store"
)

func TestSnapshotsTurnsRollbackFork(t *testing.T) {
	ctx := context.Background()
	m, _, st := newManager(t, 20)
	m.cfg.MaxTurns = 3
	sb, err := m.Create(ctx, CreateRequest{Team: "a"})
	if err != nil {
		t.Fatal(err)
	}
	named, err := m.Snapshot(ctx, "a", sb.ID, SnapshotRequest{Name: "before"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Snapshot(ctx, "a", sb.ID, SnapshotRequest{Name: "before"}); !errdefs.IsAlreadyExists(err) {
		t.Fatalf("duplicate name: %v", err)
	}
	if _, err := m.Snapshot(ctx, "b", sb.ID, SnapshotRequest{}); !errdefs.IsNotFound(err) {
		t.Fatalf("another team's sandbox: %v", err)
	}
	var turns []string
	for i := 1; i <= 5; i++ {
		tr, err := m.Turn(ctx, "a", sb.ID)
		if err != nil {
			t.Fatal(err)
		}
		if tr.Turn != i || tr.Kind != KindTurn {
			t.Fatalf("turn %d: %+v", i, tr.Snapshot)
		}
		turns = append(turns, tr.ID)
	}
	// Pruned to the newest 3 turns; the named snapshot stays.
	ready, _ := m.ListSnapshots(ctx, "a", store.SnapshotFilter{SandboxID: sb.ID, Kinds: []store.SnapshotKind{KindTurn}})
	if len(ready) != 3 || ready[0].Turn != 3 {
		t.Fatalf("after pruning: %d turns, first %+v", len(ready), ready)
	}
	if s, _ := m.GetSnapshot(ctx, "a", named.ID); s.State != SnapReady {
		t.Fatalf("named snapshot pruned: %+v", s)
	}
	rec, _ := st.GetSandbox(ctx, sb.ID)
	if rec.Head != turns[4] || rec.Turn != 5 {
		t.Fatalf("head %s turn %d", rec.Head, rec.Turn)
	}

	// Rollback: within the family only; refused while a command runs.
	done := acquire(t, m, "a", sb.ID)
	if _, err := m.Rollback(ctx, "a", sb.ID, named.ID, RollbackOptions{}); !errdefs.IsConflict(err) {
		t.Fatalf("rollback during a command: %v", err)
	}
	done()
	if _, err := m.Rollback(ctx, "a", sb.ID, named.ID, RollbackOptions{}); err != nil {
		t.Fatal(err)
	}
	rec, _ = st.GetSandbox(ctx, sb.ID)
	if rec.Head != named.ID {
		t.Fatalf("head after rollback: %s", rec.Head)
	}
	other, _ := m.Create(ctx, CreateRequest{Team: "a"})
	otherSnap, err := m.Snapshot(ctx, "a", other.ID, SnapshotRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Rollback(ctx, "a", sb.ID, otherSnap.ID, RollbackOptions{Force: true}); !errdefs.IsInvalid(err) {
		t.Fatalf("rollback to another family's snapshot: %v", err)
	}

	// Fork 3 from a turn; create from a snapshot id; count checks.
	snapID, forks, err := m.Fork(ctx, "a", sb.ID, ForkRequest{SnapshotID: turns[4], Count: 3})
	if err != nil || snapID != turns[4] || len(forks) != 3 {
		t.Fatalf("fork: %v %s %d", err, snapID, len(forks))
	}
	for _, f := range forks {
		if f.Err != nil || f.Sandbox.Family != sb.Family || f.Sandbox.ForkedFrom != turns[4] || f.Sandbox.ParentSandbox != sb.ID {
			t.Fatalf("fork result: %+v %v", f.Sandbox, f.Err)
		}
	}
	if _, _, err := m.Fork(ctx, "a", sb.ID, ForkRequest{Count: -1}); !errdefs.IsInvalid(err) {
		t.Fatalf("negative count: %v", err)
	}
	if _, _, err := m.Fork(ctx, "a", sb.ID, ForkRequest{Count: 1000}); !errdefs.IsInvalid(err) {
		t.Fatalf("count above the limit: %v", err)
	}
	fromSnap, err := m.Create(ctx, CreateRequest{Team: "a", Template: named.ID})
	if err != nil || fromSnap.ForkedFrom != named.ID {
		t.Fatalf("create from snapshot: %+v %v", fromSnap, err)
	}
	if _, err := m.Create(ctx, CreateRequest{Team: "b", Template: named.ID}); !errdefs.IsNotFound(err) {
		t.Fatalf("another team creating from the snapshot: %v", err)
	}
	// A turn with forks is never pruned.
	if n, _ := st.CountForksOf(ctx, turns[4]); n != 3 {
		t.Fatalf("forks of turn 5: %d", n)
	}

	// Promote a fork: the parent's previous state is kept.
	out, fromFork, prev, err := m.Promote(ctx, "a", forks[0].Sandbox.ID)
	if err != nil {
		t.Fatal(err)
	}
	if out.ID != sb.ID || out.Head != fromFork || prev == "" {
		t.Fatalf("promote: %+v from %s prev %s", out, fromFork, prev)
	}
	if _, _, _, err := m.Promote(ctx, "a", sb.ID); !errdefs.IsInvalid(err) {
		t.Fatalf("promote a non-fork: %v", err)
	}

	l, err := m.Lineage(ctx, "a", forks[1].Sandbox.ID)
	if err != nil {
		t.Fatal(err)
	}
	if l.Family != sb.Family || len(l.Sandboxes) < 5 || len(l.Edges) == 0 {
		t.Fatalf("lineage: family %s, %d sandboxes, %d edges", l.Family, len(l.Sandboxes), len(l.Edges))
	}

	if err := m.DeleteSnapshot(ctx, "a", named.ID); err != nil {
		t.Fatal(err)
	}
	if s, _ := m.GetSnapshot(ctx, "a", named.ID); s.State != SnapDeleted {
		t.Fatalf("tombstone: %+v", s)
	}
	if err := m.DeleteSnapshot(ctx, "a", named.ID); !errdefs.IsNotFound(err) {
		t.Fatalf("delete twice: %v", err)
	}
}

// TestSnapshotAnsweredBeforeWritten covers a host that answers a snapshot
// once its content is fixed: the record is ready at once with unknown
// sizes, gets its sizes when the snapshot is written, and becomes a
// tombstone if the filesystem loses it instead. A restart fills in sizes
// the daemon died before recording.
func TestSnapshotAnsweredBeforeWritten(t *testing.T) {
	ctx := context.Background()
	m, h, st := newManager(t, 10)
	h.settle = make(chan func(error), 4)
	sb, err := m.Create(ctx, CreateRequest{Team: "a"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := m.Turn(ctx, "a", sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if res.State != SnapReady || res.ExclusiveBytes != -1 || res.ReferencedBytes != -1 {
		t.Fatalf("answer before written: %s, sizes %d/%d; want ready, -1/-1", res.State, res.ExclusiveBytes, res.ReferencedBytes)
	}
	(<-h.settle)(nil)
	got, err := st.GetSnapshot(ctx, res.ID)
	if err != nil || got.State != SnapReady || got.ExclusiveBytes != fakeSnapshotInfo.ExclusiveBytes || got.ReferencedBytes != fakeSnapshotInfo.ReferencedBytes {
		t.Fatalf("once written: %+v %v", got, err)
	}

	lost, err := m.Turn(ctx, "a", sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	(<-h.settle)(errors.New("commit failed"))
	if got, err := st.GetSnapshot(ctx, lost.ID); err != nil || got.State != SnapDeleted {
		t.Fatalf("lost by the filesystem: %s %v, want a tombstone", got.State, err)
	}

	// The daemon died before the sizes were recorded.
	unsized, err := m.Turn(ctx, "a", sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	<-h.settle // never settled
	h.settle = nil
	if err := m.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := st.GetSnapshot(ctx, unsized.ID); err != nil || got.State != SnapReady || got.ReferencedBytes != fakeSnapshotInfo.ReferencedBytes {
		t.Fatalf("after a restart: %+v %v, want ready with its sizes", got, err)
	}
}

// TestCommandsWriteBackOnceTurnsAreTaken: a sandbox's command ends with a
// write-back (for the turn that follows) only once the sandbox takes turns.
func TestCommandsWriteBackOnceTurnsAreTaken(t *testing.T) {
	ctx := context.Background()
	m, h, _ := newManager(t, 10)
	sb, err := m.Create(ctx, CreateRequest{Team: "a"})
	if err != nil {
		t.Fatal(err)
	}
	acquire(t, m, "a", sb.ID)()
	if len(h.writeBacks) != 0 {
		t.Fatalf("write-backs before any turn: %v", h.writeBacks)
	}
	if _, err := m.Turn(ctx, "a", sb.ID); err != nil {
		t.Fatal(err)
	}
	outer := acquire(t, m, "a", sb.ID)
	inner := acquire(t, m, "a", sb.ID)
	inner()
	if len(h.writeBacks) != 0 {
		t.Fatalf("write-back while a command still runs: %v", h.writeBacks)
	}
	outer()
	outer() // done twice counts once
	if len(h.writeBacks) != 1 || h.writeBacks[0] != sb.ID {
		t.Fatalf("write-backs after the last command: %v, want [%s]", h.writeBacks, sb.ID)
	}
}

// A deleted sandbox's lineage is still served: its family lives on in its
// snapshots.
func TestLineageOfDeletedSandbox(t *testing.T) {
	ctx := context.Background()
	m, _, _ := newManager(t, 10)
	sb, err := m.Create(ctx, CreateRequest{Team: "a", Template: "base"})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := m.Snapshot(ctx, "a", sb.ID, SnapshotRequest{Name: "kept"})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Delete(ctx, "a", sb.ID); err != nil {
		t.Fatal(err)
	}
	l, err := m.Lineage(ctx, "a", sb.ID)
	if err != nil || l.Family != sb.Family || len(l.Snapshots) != 1 || l.Snapshots[0].ID != snap.ID {
		t.Fatalf("lineage of a deleted sandbox: %+v, %v", l, err)
	}
	if _, err := m.Lineage(ctx, "b", sb.ID); !errdefs.IsNotFound(err) {
		t.Errorf("another team: %v, want not found", err)
	}
	bare, err := m.Create(ctx, CreateRequest{Team: "a", Template: "base"})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Delete(ctx, "a", bare.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Lineage(ctx, "a", bare.ID); !errdefs.IsNotFound(err) {
		t.Errorf("a deleted sandbox that took no snapshot: %v, want not found", err)
	}
}
