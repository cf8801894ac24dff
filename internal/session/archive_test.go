package session

import (
	"context"
	"slices"
	"testing"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/store"
)

func turnsOf(states map[int]store.SnapshotState) []store.Snapshot {
	var out []store.Snapshot
	for n, st := range states {
		out = append(out, store.Snapshot{ID: "t" + store.TurnName(n), Turn: n, State: st})
	}
	return out
}

func jobTurns(jobs []archiveJob) (turns, anchors []int) {
	for _, j := range jobs {
		turns = append(turns, j.snap.Turn)
		anchors = append(anchors, j.anchor.Turn)
	}
	return turns, anchors
}

func TestPlanArchive(t *testing.T) {
	all := map[int]store.SnapshotState{}
	for n := 1; n <= 60; n++ {
		all[n] = SnapReady
	}
	all[3] = SnapArchived // done already
	noForks := func(string) bool { return false }
	turns, anchors := jobTurns(planArchive(turnsOf(all), 8, 20, noForks))
	var want, wantAnchors []int
	for n := 2; n <= 52; n++ {
		if n == 3 || n == 21 || n == 41 {
			continue
		}
		want = append(want, n)
		wantAnchors = append(wantAnchors, (n-1)/20*20+1)
	}
	if !slices.Equal(turns, want) || !slices.Equal(anchors, wantAnchors) {
		t.Errorf("archived turns %v against %v\nwant %v against %v", turns, anchors, want, wantAnchors)
	}

	// Forked turns stay; a missing anchor sends its block to the one
	// before; turns with no anchor below stay.
	delete(all, 21)
	for n := 1; n <= 4; n++ {
		delete(all, n)
	}
	forked := func(id string) bool { return id == "t"+store.TurnName(30) }
	turns, anchors = jobTurns(planArchive(turnsOf(all), 8, 20, forked))
	if slices.Contains(turns, 30) || slices.Contains(turns, 10) {
		t.Errorf("archived a forked turn or one without an anchor: %v", turns)
	}
	if len(turns) != 52-41 || turns[0] != 42 {
		t.Errorf("with anchors 1 and 21 gone, want only 42..52 archived; got %v", turns)
	}
	if jobs := planArchive(turnsOf(all), 0, 20, noForks); jobs != nil {
		t.Errorf("archiving off, got %d jobs", len(jobs))
	}
}

func TestArchiveRestoreOnDemand(t *testing.T) {
	ctx := context.Background()
	m, h, st := newManager(t, 20)
	m.cfg.ArchiveAfter, m.cfg.AnchorEvery = 4, 5
	sb, err := m.Create(ctx, CreateRequest{Team: "a"})
	if err != nil {
		t.Fatal(err)
	}
	named, err := m.Snapshot(ctx, "a", sb.ID, SnapshotRequest{Name: "keep-me"})
	if err != nil {
		t.Fatal(err)
	}
	turn := map[int]string{}
	for n := 1; n <= 12; n++ {
		tr, err := m.Turn(ctx, "a", sb.ID)
		if err != nil {
			t.Fatal(err)
		}
		turn[n] = tr.ID
	}
	if _, _, err := m.Fork(ctx, "a", sb.ID, ForkRequest{SnapshotID: turn[3]}); err != nil {
		t.Fatal(err)
	}
	m.archiveSandbox(ctx, sb.ID)

	state := func(n int) store.SnapshotState {
		s, err := st.GetSnapshot(ctx, turn[n])
		if err != nil {
			t.Fatal(err)
		}
		return s.State
	}
	// Anchors 1, 6, 11; the newest four (9-12); the forked turn 3 stay.
	for n := 1; n <= 12; n++ {
		want := SnapArchived
		if n == 1 || n == 6 || n == 11 || n >= 9 || n == 3 {
			want = SnapReady
		}
		if got := state(n); got != want {
			t.Errorf("turn %d is %s, want %s", n, got, want)
		}
		if h.HasSnapshot(ctx, turn[n]) != (want == SnapReady) {
			t.Errorf("turn %d: volume in pool = %t", n, h.HasSnapshot(ctx, turn[n]))
		}
	}
	if s, _ := st.GetSnapshot(ctx, named.ID); s.State != SnapReady {
		t.Errorf("named snapshot is %s", s.State)
	}
	if s, _ := st.GetSnapshot(ctx, turn[8]); s.ArchiveParent != turn[6] || !h.HasArchive(s.ArchivePath) {
		t.Errorf("turn 8 archived against %s at %q, want turn 6's id", s.ArchiveParent, s.ArchivePath)
	}
	list, _ := m.ListSnapshots(ctx, "a", store.SnapshotFilter{SandboxID: sb.ID, Kinds: []store.SnapshotKind{KindTurn}})
	if len(list) != 12 {
		t.Errorf("default listing has %d turns, want all 12 (archived included)", len(list))
	}
	ready, _ := m.ListSnapshots(ctx, "a", store.SnapshotFilter{SandboxID: sb.ID, Kinds: []store.SnapshotKind{KindTurn},
		States: []store.SnapshotState{SnapReady}})
	if len(ready) != 7 {
		t.Errorf("ready listing has %d turns, want 7", len(ready))
	}

	// Rollback restores on demand.
	if _, err := m.Rollback(ctx, "a", sb.ID, turn[2], false); err != nil {
		t.Fatal(err)
	}
	if state(2) != SnapReady || !slices.Contains(h.restored, turn[2]) {
		t.Errorf("turn 2 after rollback: %s, restored %v", state(2), h.restored)
	}
	// Diff restores both sides; create-from-snapshot restores its source.
	if _, err := m.Diff(ctx, "a", turn[7], turn[8]); err != nil {
		t.Fatal(err)
	}
	if state(7) != SnapReady || state(8) != SnapReady {
		t.Errorf("after diff: turn 7 %s, turn 8 %s", state(7), state(8))
	}
	if _, err := m.Create(ctx, CreateRequest{Team: "a", Template: turn[5]}); err != nil {
		t.Fatal(err)
	}
	if state(5) != SnapReady {
		t.Errorf("turn 5 after create from it: %s", state(5))
	}

	// An anchor with archived dependents is not deleted; an archived
	// snapshot is (its stream goes).
	if err := m.DeleteSnapshot(ctx, "a", turn[1]); !errdefs.IsConflict(err) {
		t.Errorf("delete of an anchor: %v, want ErrConflict", err)
	}
	s4, _ := st.GetSnapshot(ctx, turn[4])
	if err := m.DeleteSnapshot(ctx, "a", turn[4]); err != nil {
		t.Fatal(err)
	}
	if state(4) != SnapDeleted || h.HasArchive(s4.ArchivePath) {
		t.Errorf("deleted archived turn: %s, stream kept %t", state(4), h.HasArchive(s4.ArchivePath))
	}

	// Archiving again reuses the streams of restored turns (no new send)
	// and leaves turn 5 in the pool while its fork lives.
	sends := len(h.archived)
	m.archiveSandbox(ctx, sb.ID)
	if len(h.archived) != sends {
		t.Errorf("re-archiving sent %v again", h.archived[sends:])
	}
	for _, n := range []int{2, 7, 8} {
		if state(n) != SnapArchived {
			t.Errorf("turn %d not archived again: %s", n, state(n))
		}
	}
	if state(5) != SnapReady {
		t.Errorf("turn 5 has a fork now and was archived")
	}
	// Deleting turn 1's dependents frees it.
	for _, n := range []int{2} {
		if err := m.DeleteSnapshot(ctx, "a", turn[n]); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.DeleteSnapshot(ctx, "a", turn[1]); err != nil {
		t.Errorf("delete of an anchor without dependents: %v", err)
	}
}

func TestArchiveRecovery(t *testing.T) {
	ctx := context.Background()
	m, h, st := newManager(t, 20)
	m.cfg.ArchiveAfter, m.cfg.AnchorEvery = 1, 10
	sb, err := m.Create(ctx, CreateRequest{Team: "a"})
	if err != nil {
		t.Fatal(err)
	}
	turn := map[int]string{}
	for n := 1; n <= 5; n++ {
		tr, err := m.Turn(ctx, "a", sb.ID)
		if err != nil {
			t.Fatal(err)
		}
		turn[n] = tr.ID
	}
	m.archiveSandbox(ctx, sb.ID) // 2, 3, 4 archived
	get := func(n int) store.Snapshot {
		s, err := st.GetSnapshot(ctx, turn[n])
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// Turn 2: the daemon died after recording the archive, before the
	// volume went. Turn 3: its stream is lost. Turn 5: its volume is gone
	// but a stream was written for it. And a stray stream.
	h.snaps[turn[2]] = true
	delete(h.streams, get(3).ArchivePath)
	if err := st.SetSnapshotArchive(ctx, turn[5], turn[1], "/archive/"+turn[5]+".stream"); err != nil {
		t.Fatal(err)
	}
	h.streams["/archive/"+turn[5]+".stream"] = turn[1]
	delete(h.snaps, turn[5])
	h.streams["/archive/stray.stream"] = turn[1]

	if err := m.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	for n, want := range map[int]store.SnapshotState{1: SnapReady, 2: SnapReady, 3: SnapDeleted, 4: SnapArchived, 5: SnapArchived} {
		if got := get(n).State; got != want {
			t.Errorf("turn %d after recovery: %s, want %s", n, got, want)
		}
	}
	if h.HasArchive("/archive/stray.stream") {
		t.Error("stray stream kept")
	}
	if !h.HasArchive(get(4).ArchivePath) || !h.HasArchive(get(2).ArchivePath) {
		t.Error("a stream a record names was removed")
	}
}
