package session

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

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

// stepsOf renders steps as "turn<parent drop [turns]" ("turn" alone when
// nothing is sent).
func stepsOf(steps []archiveStep) []string {
	var out []string
	for _, st := range steps {
		s := strconv.Itoa(st.snap.Turn)
		if st.parent.ID != "" {
			s += "<" + strconv.Itoa(st.parent.Turn)
		}
		var drops []int
		for _, d := range st.drop {
			drops = append(drops, d.Turn)
		}
		out = append(out, fmt.Sprintf("%s drop %v", s, drops))
	}
	return out
}

func step(turn, parent int, drops ...int) string {
	s := strconv.Itoa(turn)
	if parent > 0 {
		s += "<" + strconv.Itoa(parent)
	}
	return fmt.Sprintf("%s drop %v", s, drops)
}

// windowOf is what store.TurnWindow reads, computed from a whole history:
// the ready turns, each with the usable turn after it, and the number of
// the newest usable turn not among the newest keep (0: none).
func windowOf(turns []store.Snapshot, keep int) (window []store.Snapshot, oldThrough int) {
	var usable []store.Snapshot
	for _, t := range turns {
		if slices.Contains(usableStates, t.State) {
			usable = append(usable, t)
		}
	}
	slices.SortFunc(usable, func(a, b store.Snapshot) int { return a.Turn - b.Turn })
	if len(usable) > keep {
		oldThrough = usable[len(usable)-keep-1].Turn
	}
	for i, t := range usable {
		if t.State == SnapReady || i > 0 && usable[i-1].State == SnapReady {
			window = append(window, t)
		}
	}
	return window, oldThrough
}

// planKeeping plans a whole history's archiving the way the archiver does:
// from its window, keeping the newest keep turns.
func planKeeping(turns []store.Snapshot, keep, every int, forked func(string) bool) []archiveStep {
	window, oldThrough := windowOf(turns, keep)
	return planArchive(window, oldThrough, every, forked)
}

func TestPlanArchive(t *testing.T) {
	all := map[int]store.SnapshotState{}
	for n := 1; n <= 60; n++ {
		all[n] = SnapReady
	}
	all[3] = SnapArchived // done already
	noForks := func(string) bool { return false }
	// A chain: each turn against the one before, whose volume then goes;
	// anchors 1, 21, 41 stay; a turn before an anchor goes after its own
	// send; turn 52, the newest old one, stays for turn 53's send.
	want := []string{step(2, 1, 2), step(4, 1)}
	for n := 5; n <= 52; n++ {
		switch {
		case n == 21 || n == 41:
		case n == 22 || n == 42:
			want = append(want, step(n, n-1))
		case n == 20 || n == 40:
			want = append(want, step(n, n-1, n-1, n))
		default:
			want = append(want, step(n, n-1, n-1))
		}
	}
	if got := stepsOf(planKeeping(turnsOf(all), 8, 20, noForks)); !slices.Equal(got, want) {
		t.Errorf("steps\n%v\nwant\n%v", got, want)
	}

	// A forked turn is sent but stays; turns with no turn below in the pool
	// stay; with anchor 21 gone, the chain runs on through 20.
	delete(all, 21)
	for n := 1; n <= 4; n++ {
		delete(all, n)
	}
	forked := func(id string) bool { return id == "t"+store.TurnName(30) }
	want = nil
	for n := 6; n <= 52; n++ {
		switch {
		case n == 21 || n == 41:
		case n == 6 || n == 31 || n == 42:
			want = append(want, step(n, n-1))
		case n == 22:
			want = append(want, step(n, 20, 20))
		case n == 40:
			want = append(want, step(n, n-1, n-1, n))
		default:
			want = append(want, step(n, n-1, n-1))
		}
	}
	if got := stepsOf(planKeeping(turnsOf(all), 8, 20, forked)); !slices.Equal(got, want) {
		t.Errorf("with forks and gaps, steps\n%v\nwant\n%v", got, want)
	}
	if steps := planArchive(turnsOf(all), 0, 20, noForks); steps != nil {
		t.Errorf("archiving off, got %d steps", len(steps))
	}

	// A restored turn (ready, with its stream) is not sent again; it goes
	// once the turn after it has been sent against it.
	turns := turnsOf(map[int]store.SnapshotState{1: SnapReady, 2: SnapArchived, 3: SnapReady, 4: SnapReady, 5: SnapReady})
	for i := range turns {
		if turns[i].Turn == 2 || turns[i].Turn == 3 {
			turns[i].ArchivePath = "/archive/x.stream"
		}
	}
	if got, want := stepsOf(planKeeping(turns, 2, 100, noForks)), []string{}; len(got) != 0 {
		t.Errorf("restored turn 3 with turn 4 still to come: %v, want %v", got, want)
	}
	if got, want := stepsOf(planKeeping(turns, 1, 100, noForks)), []string{step(4, 3, 3)}; !slices.Equal(got, want) {
		t.Errorf("restored turn 3, turn 4 old: %v, want %v", got, want)
	}
}

// The archiver plans from a window of the history (store.TurnWindow):
// the plan must be the one the whole history gives.
func TestPlanArchiveWindowMatchesHistory(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	states := []store.SnapshotState{SnapReady, SnapReady, SnapArchived, SnapArchived, SnapArchived, SnapDeleted, SnapCreating}
	for round := range 500 {
		var turns []store.Snapshot
		for n := 1; n <= 1+rng.IntN(120); n++ {
			if rng.IntN(10) == 0 {
				continue // never taken (a gap in the numbers)
			}
			st := states[rng.IntN(len(states))]
			sn := store.Snapshot{ID: "t" + store.TurnName(n), Turn: n, State: st}
			if st == SnapArchived || st == SnapReady && rng.IntN(4) == 0 {
				sn.ArchivePath = "/archive/" + sn.ID + ".stream"
			}
			turns = append(turns, sn)
		}
		keep, every := 1+rng.IntN(40), 2+rng.IntN(30)
		forked := func(id string) bool { return len(id)%3 == round%3 }
		var usable []store.Snapshot
		for _, t := range turns {
			if slices.Contains(usableStates, t.State) {
				usable = append(usable, t)
			}
		}
		window, oldThrough := windowOf(turns, keep)
		got := stepsOf(planArchive(window, oldThrough, every, forked))
		want := stepsOf(planArchive(usable, oldThrough, every, forked))
		if !slices.Equal(got, want) {
			t.Fatalf("round %d (keep %d, every %d): from the window\n%v\nfrom the whole history\n%v", round, keep, every, got, want)
		}
	}
}

// takeTurns takes n turns of team a's sandbox id and returns their ids by
// turn number.
func takeTurns(t *testing.T, m *Manager, id string, n int) map[int]string {
	t.Helper()
	turn := map[int]string{}
	for i := 1; i <= n; i++ {
		tr, err := m.Turn(context.Background(), "a", id)
		if err != nil {
			t.Fatal(err)
		}
		turn[i] = tr.ID
	}
	return turn
}

func TestArchiveRestoreOnDemand(t *testing.T) {
	ctx := context.Background()
	m, h, st := newManager(t, 20)
	m.cfg.ArchiveAfter, m.cfg.AnchorEvery, m.cfg.DropBatch = 4, 5, 1
	sb, err := m.Create(ctx, CreateRequest{Team: "a"})
	if err != nil {
		t.Fatal(err)
	}
	named, err := m.Snapshot(ctx, "a", sb.ID, SnapshotRequest{Name: "keep-me"})
	if err != nil {
		t.Fatal(err)
	}
	turn := takeTurns(t, m, sb.ID, 12)
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
	// Anchors 1, 6, 11; the newest four (9-12); the forked turn 3; turn 8,
	// the newest old one, until turn 9 is sent against it.
	for n := 1; n <= 12; n++ {
		want := SnapArchived
		if n == 1 || n == 6 || n == 11 || n >= 8 || n == 3 {
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
	if s, _ := st.GetSnapshot(ctx, turn[8]); s.ArchiveParent != turn[7] || !h.HasArchive(s.ArchivePath) {
		t.Errorf("turn 8 archived against %s at %q, want turn 7's id", s.ArchiveParent, s.ArchivePath)
	}
	if s, _ := st.GetSnapshot(ctx, turn[4]); s.ArchiveParent != turn[3] {
		t.Errorf("turn 4 archived against %s, want the forked turn 3", s.ArchiveParent)
	}
	list, _ := m.ListSnapshots(ctx, "a", store.SnapshotFilter{SandboxID: sb.ID, Kinds: []store.SnapshotKind{KindTurn}})
	if len(list) != 12 {
		t.Errorf("default listing has %d turns, want all 12 (archived included)", len(list))
	}
	ready, _ := m.ListSnapshots(ctx, "a", store.SnapshotFilter{SandboxID: sb.ID, Kinds: []store.SnapshotKind{KindTurn},
		States: []store.SnapshotState{SnapReady}})
	if len(ready) != 8 {
		t.Errorf("ready listing has %d turns, want 8", len(ready))
	}

	// An anchor with archived dependents is not deleted; an archived turn
	// others are deltas against is, and its stream stays as their link.
	if err := m.DeleteSnapshot(ctx, "a", turn[1]); !errdefs.IsConflict(err) {
		t.Errorf("delete of an anchor: %v, want ErrConflict", err)
	}
	s4, _ := st.GetSnapshot(ctx, turn[4])
	if err := m.DeleteSnapshot(ctx, "a", turn[4]); err != nil {
		t.Fatal(err)
	}
	if state(4) != SnapDeleted || !h.HasArchive(s4.ArchivePath) {
		t.Errorf("deleted link turn 4: %s, stream kept %t", state(4), h.HasArchive(s4.ArchivePath))
	}
	if _, err := m.Rollback(ctx, "a", sb.ID, turn[4], RollbackOptions{}); !errdefs.IsNotFound(err) {
		t.Errorf("rollback to deleted turn 4: %v, want ErrNotFound", err)
	}

	// Rollback restores on demand, through the deleted link: 4's and 5's
	// streams over the forked turn 3.
	if _, err := m.Rollback(ctx, "a", sb.ID, turn[5], RollbackOptions{}); err != nil {
		t.Fatal(err)
	}
	if state(5) != SnapReady || !slices.Contains(h.restored, turn[5]) || h.chains[len(h.chains)-1] != 2 {
		t.Errorf("turn 5 after rollback: %s, restored %v, chains %v", state(5), h.restored, h.chains)
	}
	// Diff restores both sides; create-from-snapshot restores its source.
	if _, err := m.Diff(ctx, "a", turn[7], turn[8]); err != nil {
		t.Fatal(err)
	}
	if state(7) != SnapReady || state(8) != SnapReady {
		t.Errorf("after diff: turn 7 %s, turn 8 %s", state(7), state(8))
	}
	if _, err := m.Create(ctx, CreateRequest{Team: "a", Template: turn[2]}); err != nil {
		t.Fatal(err)
	}
	if state(2) != SnapReady {
		t.Errorf("turn 2 after create from it: %s", state(2))
	}

	// Archiving again sends nothing (restored turns keep their streams),
	// drops 5 and 7 again and leaves turn 2 in the pool while its fork
	// lives.
	sends := len(h.archived)
	m.archiveSandbox(ctx, sb.ID)
	if len(h.archived) != sends {
		t.Errorf("re-archiving sent %v again", h.archived[sends:])
	}
	for _, n := range []int{5, 7} {
		if state(n) != SnapArchived {
			t.Errorf("turn %d not archived again: %s", n, state(n))
		}
	}
	if state(2) != SnapReady {
		t.Errorf("turn 2 has a fork now and was archived")
	}
	// Deleting turn 5, the last that needs the deleted link 4, drops 4's
	// stream too; anchor 1 is then free to go (turn 2 has its volume).
	if err := m.DeleteSnapshot(ctx, "a", turn[5]); err != nil {
		t.Fatal(err)
	}
	if h.HasArchive(s4.ArchivePath) {
		t.Error("deleted link turn 4 kept its stream with nothing needing it")
	}
	if err := m.DeleteSnapshot(ctx, "a", turn[1]); err != nil {
		t.Errorf("delete of an anchor without dependents: %v", err)
	}
	if s, _ := st.GetSnapshot(ctx, turn[2]); s.ArchivePath != "" || state(2) != SnapReady {
		t.Errorf("turn 2 kept a stream against deleted turn 1: %+v", s)
	}
}

func TestArchiveRecovery(t *testing.T) {
	ctx := context.Background()
	m, h, st := newManager(t, 20)
	m.cfg.ArchiveAfter, m.cfg.AnchorEvery, m.cfg.DropBatch = 1, 10, 1
	sb, err := m.Create(ctx, CreateRequest{Team: "a"})
	if err != nil {
		t.Fatal(err)
	}
	turn := takeTurns(t, m, sb.ID, 5)
	m.archiveSandbox(ctx, sb.ID) // 2, 3 archived; 4 streamed, its volume kept for 5
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
	for n, want := range map[int]store.SnapshotState{1: SnapReady, 2: SnapReady, 3: SnapDeleted, 4: SnapReady, 5: SnapArchived} {
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
	// Turn 4's stream is a delta against turn 3, whose stream is lost: its
	// volume stays until it is sent again against a turn that is there.
	m.archiveSandbox(ctx, sb.ID)
	if got := get(4); got.State != SnapReady || got.ArchivePath != "" {
		t.Errorf("turn 4 over a broken chain: %s, stream %q; want ready without a stream", got.State, got.ArchivePath)
	}
	m.archiveSandbox(ctx, sb.ID)
	if got := get(4); got.State != SnapArchived || got.ArchiveParent != turn[1] {
		t.Errorf("turn 4 archived again: %s against %s, want archived against turn 1", got.State, got.ArchiveParent)
	}
	unlock, err := m.useSnapshot(ctx, turn[4])
	if err != nil {
		t.Fatalf("restore turn 4: %v", err)
	}
	unlock()
}

// TestRestoreWhileBaseArchived archives the base a restore has just found
// (as the archiver can, between the walk and the lock): the restore walks
// again and rebuilds the turn from the next base down, instead of failing.
func TestRestoreWhileBaseArchived(t *testing.T) {
	ctx := context.Background()
	m, h, st := newManager(t, 20)
	m.cfg.ArchiveAfter, m.cfg.AnchorEvery, m.cfg.DropBatch = 4, 100, 1
	sb, err := m.Create(ctx, CreateRequest{Team: "a"})
	if err != nil {
		t.Fatal(err)
	}
	turn := takeTurns(t, m, sb.ID, 10)
	// Turn 3 has a fork, so it keeps its volume (and gets its stream).
	if _, _, err := m.Fork(ctx, "a", sb.ID, ForkRequest{SnapshotID: turn[3]}); err != nil {
		t.Fatal(err)
	}
	m.archiveSandbox(ctx, sb.ID)
	if s, _ := st.GetSnapshot(ctx, turn[4]); s.State != SnapArchived || s.ArchiveParent != turn[3] {
		t.Fatalf("turn 4: %s against %s, want archived against turn 3", s.State, s.ArchiveParent)
	}
	if s, _ := st.GetSnapshot(ctx, turn[3]); s.State != SnapReady || s.ArchivePath == "" {
		t.Fatalf("turn 3: %s, stream %q; want ready with its stream", s.State, s.ArchivePath)
	}

	var bases []string
	m.chainWalked = func(base string) {
		bases = append(bases, base)
		if len(bases) == 1 {
			if err := m.dropVolume(ctx, base); err != nil {
				t.Errorf("archive the base: %v", err)
			}
		}
	}
	if _, err := m.Diff(ctx, "a", turn[4], turn[9]); err != nil {
		t.Fatalf("diff from turn 4 with its base archived during the restore: %v", err)
	}
	if len(bases) != 2 || bases[0] != turn[3] || bases[1] != turn[1] {
		t.Errorf("walks ended at %v, want turn 3 then turn 1", bases)
	}
	if s, _ := st.GetSnapshot(ctx, turn[4]); s.State != SnapReady || h.chains[len(h.chains)-1] != 3 {
		t.Errorf("turn 4 is %s, last chain %v; want ready through turns 2, 3 and 4's streams", s.State, h.chains)
	}
}

// TestArchiveDropsInBatches: the archiver writes every old turn's stream at
// once but drops their volumes only DropBatch at a time, or once the
// sandbox has taken no turn for dropIdle.
func TestArchiveDropsInBatches(t *testing.T) {
	ctx := context.Background()
	m, h, st := newManager(t, 20)
	now := time.Now()
	m.cfg.Now = func() time.Time { return now }
	m.cfg.ArchiveAfter, m.cfg.AnchorEvery, m.cfg.DropBatch = 2, 100, 3
	sb, err := m.Create(ctx, CreateRequest{Team: "a"})
	if err != nil {
		t.Fatal(err)
	}
	turn := map[int]string{}
	check := func(stage string, archived ...int) {
		t.Helper()
		for n, id := range turn {
			s, err := st.GetSnapshot(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			want := SnapReady
			if slices.Contains(archived, n) {
				want = SnapArchived
			}
			if s.State != want || h.HasSnapshot(ctx, id) != (want == SnapReady) {
				t.Errorf("%s: turn %d is %s (volume in pool %t), want %s", stage, n, s.State, h.HasSnapshot(ctx, id), want)
			}
		}
	}
	take := func(n int) {
		t.Helper()
		for i := 0; i < n; i++ {
			tr, err := m.Turn(ctx, "a", sb.ID)
			if err != nil {
				t.Fatal(err)
			}
			turn[len(turn)+1] = tr.ID
		}
	}
	// Six turns: turns 2 and 3 have their streams, but two volumes make no
	// batch.
	take(6)
	m.archiveSandbox(ctx, sb.ID)
	check("after 6 turns")
	for _, n := range []int{2, 3, 4} {
		if s, _ := st.GetSnapshot(ctx, turn[n]); s.ArchivePath == "" {
			t.Errorf("turn %d has no stream after 6 turns", n)
		}
	}
	// A seventh: three volumes to drop, a batch.
	take(1)
	m.archiveSandbox(ctx, sb.ID)
	check("after 7 turns", 2, 3, 4)
	// An eighth leaves one; it goes once the sandbox has been quiet.
	take(1)
	m.archiveSandbox(ctx, sb.ID)
	check("after 8 turns", 2, 3, 4)
	now = now.Add(dropIdle + time.Second)
	m.archiveSandbox(ctx, sb.ID)
	check("after a quiet while", 2, 3, 4, 5)
}
