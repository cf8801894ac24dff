package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
)

func TestSnapshotArchiveFields(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	anchor := testSnapshot("anchor1", "sb1")
	turn := testSnapshot("turn5", "sb1")
	turn.Kind, turn.Turn = SnapshotTurn, 5
	for _, sn := range []Snapshot{anchor, turn} {
		if err := s.CreateSnapshot(ctx, sn); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SetSnapshotArchive(ctx, "turn5", "anchor1", "/pool/archive/turn5.stream"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetSnapshotArchive(ctx, "turn5", "anchor1", ""); !errdefs.IsInvalid(err) {
		t.Errorf("parent without path: %v, want ErrInvalid", err)
	}
	if err := s.SetSnapshotArchive(ctx, "nope", "", ""); !errdefs.IsNotFound(err) {
		t.Errorf("missing snapshot: %v, want ErrNotFound", err)
	}
	// ready -> archived -> ready, compare-and-set.
	if err := s.UpdateSnapshotState(ctx, "turn5", []SnapshotState{SnapshotReady}, SnapshotArchived); err != nil {
		t.Fatal(err)
	}
	if n, err := s.CountArchivedOn(ctx, "anchor1"); err != nil || n != 1 {
		t.Errorf("CountArchivedOn = %d, %v; want 1", n, err)
	}
	got, err := s.GetSnapshot(ctx, "turn5")
	if err != nil || got.State != SnapshotArchived || got.ArchiveParent != "anchor1" || got.ArchivePath != "/pool/archive/turn5.stream" {
		t.Errorf("archived snapshot = %+v, %v", got, err)
	}
	ready, err := s.ListSnapshots(ctx, SnapshotFilter{SandboxID: "sb1", States: []SnapshotState{SnapshotReady}})
	if err != nil || len(ready) != 1 || ready[0].ID != "anchor1" {
		t.Errorf("ready snapshots = %+v, %v; want only anchor1", ready, err)
	}
	both, err := s.ListSnapshots(ctx, SnapshotFilter{SandboxID: "sb1", States: []SnapshotState{SnapshotReady, SnapshotArchived}})
	if err != nil || len(both) != 2 {
		t.Errorf("ready+archived snapshots = %d, %v; want 2", len(both), err)
	}
	// The turn's name stays taken while archived.
	dup := testSnapshot("turn5b", "sb1")
	dup.Kind, dup.Turn = SnapshotTurn, 5
	if err := s.CreateSnapshot(ctx, dup); !errdefs.IsAlreadyExists(err) {
		t.Errorf("second turn-5 while archived: %v, want ErrAlreadyExists", err)
	}
	if err := s.UpdateSnapshotState(ctx, "turn5", []SnapshotState{SnapshotReady}, SnapshotDeleted); !errdefs.IsConflict(err) {
		t.Errorf("ready->deleted of an archived snapshot: %v, want ErrConflict", err)
	}
	if err := s.UpdateSnapshotState(ctx, "turn5", []SnapshotState{SnapshotArchived}, SnapshotReady); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.CountArchivedOn(ctx, "anchor1"); n != 0 {
		t.Errorf("CountArchivedOn after restore = %d, want 0", n)
	}
}

func TestSnapshotMemoryField(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	sn := testSnapshot("mem1", "sb1")
	sn.MemoryBytes = 4096
	if err := s.CreateSnapshot(ctx, sn); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetSnapshot(ctx, "mem1"); err != nil || got.MemoryBytes != 4096 {
		t.Fatalf("created with a memory image: %+v, %v", got, err)
	}
	if err := s.SetSnapshotMemory(ctx, "mem1", 1<<20); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetSnapshot(ctx, "mem1"); err != nil || got.MemoryBytes != 1<<20 {
		t.Fatalf("after SetSnapshotMemory: %+v, %v", got, err)
	}
	if err := s.SetSnapshotMemory(ctx, "mem1", -1); !errdefs.IsInvalid(err) {
		t.Errorf("negative size: %v, want ErrInvalid", err)
	}
	if err := s.SetSnapshotMemory(ctx, "nope", 1); !errdefs.IsNotFound(err) {
		t.Errorf("missing snapshot: %v, want ErrNotFound", err)
	}
}

func TestArchiveParents(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	// anchor (ready) <- t2 (archived) <- t3 (deleted, kept as a link) <- t4
	// (archived) <- t5 (ready, about to be dropped); t9's stream names a
	// parent nobody recorded; c1 <- c2 <- c1 is a cycle (a bug) of archived
	// snapshots; t7 is a delta against t6, still being taken.
	type link struct {
		id, parent string
		state      SnapshotState
	}
	for _, l := range []link{
		{"anchor", "", SnapshotReady}, {"t2", "anchor", SnapshotArchived}, {"t3", "t2", SnapshotDeleted},
		{"t4", "t3", SnapshotArchived}, {"t5", "t4", SnapshotReady}, {"t9", "gone", SnapshotArchived},
		{"c1", "c2", SnapshotArchived}, {"c2", "c1", SnapshotArchived},
		{"t6", "", SnapshotCreating}, {"t7", "t6", SnapshotArchived},
	} {
		sn := testSnapshot(l.id, "sb1")
		sn.State = l.state
		if err := s.CreateSnapshot(ctx, sn); err != nil {
			t.Fatal(err)
		}
		if l.parent != "" {
			if err := s.SetSnapshotArchive(ctx, l.id, l.parent, "/pool/archive/"+l.id+".stream"); err != nil {
				t.Fatal(err)
			}
		}
	}
	ids := func(list []Snapshot) []string {
		var out []string
		for _, sn := range list {
			out = append(out, sn.ID)
		}
		return out
	}
	for _, tc := range []struct {
		from string
		max  int
		want []string
	}{
		{"t4", 100, []string{"t4", "t3", "t2", "anchor"}}, // stops after the ready base
		{"anchor", 100, []string{"anchor"}},
		{"t9", 100, []string{"t9"}}, // its parent is not recorded
		{"nobody", 100, nil},
		{"c1", 5, []string{"c1", "c2", "c1", "c2", "c1"}}, // bounded
		{"t7", 100, []string{"t7", "t6"}},                 // stops at a snapshot being taken
	} {
		got, err := s.ArchiveParents(ctx, tc.from, tc.max)
		if err != nil {
			t.Fatalf("ArchiveParents(%s): %v", tc.from, err)
		}
		if g := ids(got); !slices.Equal(g, tc.want) {
			t.Errorf("ArchiveParents(%s, %d) = %v; want %v", tc.from, tc.max, g, tc.want)
		}
	}
	got, err := s.ArchiveParents(ctx, "t4", 100)
	if err != nil || got[1].State != SnapshotDeleted || got[1].ArchivePath != "/pool/archive/t3.stream" || got[3].State != SnapshotReady {
		t.Errorf("links carry their records: %+v, %v", got, err)
	}
}

// TurnWindow against the same window computed from the whole history.
func TestTurnWindow(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	if w, err := s.TurnWindow(ctx, "sb1", 4); err != nil || len(w.Turns) != 0 || w.OldThrough != 0 || !w.Newest.IsZero() {
		t.Errorf("no turns: %+v, %v; want an empty window", w, err)
	}
	if _, err := s.TurnWindow(ctx, "../sb1", 4); !errdefs.IsInvalid(err) {
		t.Errorf("bad sandbox id: %v, want ErrInvalid", err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	states := []SnapshotState{SnapshotReady, SnapshotArchived, SnapshotArchived, SnapshotArchived, SnapshotDeleted, SnapshotCreating}
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var history []Snapshot // sb1's turns
	for n := 1; n <= 300; n++ {
		if rng.IntN(10) == 0 {
			continue
		}
		sn := testSnapshot(fmt.Sprintf("t%03d", n), "sb1")
		sn.Kind, sn.Turn, sn.State = SnapshotTurn, n, states[rng.IntN(len(states))]
		sn.CreatedAt = base.Add(time.Duration(n) * time.Second)
		if err := s.CreateSnapshot(ctx, sn); err != nil {
			t.Fatal(err)
		}
		history = append(history, sn)
	}
	// Neither another sandbox's turns nor sb1's other snapshots count.
	other := testSnapshot("other", "sb2")
	other.Kind, other.Turn, other.CreatedAt = SnapshotTurn, 400, base.Add(time.Hour)
	named := testSnapshot("named", "sb1")
	named.Kind, named.Name, named.CreatedAt = SnapshotNamed, "keep-me", base.Add(time.Hour)
	for _, sn := range []Snapshot{other, named} {
		if err := s.CreateSnapshot(ctx, sn); err != nil {
			t.Fatal(err)
		}
	}

	var usable []Snapshot
	for _, sn := range history {
		if sn.State == SnapshotReady || sn.State == SnapshotArchived {
			usable = append(usable, sn)
		}
	}
	var want []string
	for i, sn := range usable {
		if sn.State == SnapshotReady || i > 0 && usable[i-1].State == SnapshotReady {
			want = append(want, sn.ID)
		}
	}
	for _, keep := range []int{0, 1, 32, len(usable) - 1, len(usable), len(usable) + 5} {
		w, err := s.TurnWindow(ctx, "sb1", keep)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, sn := range w.Turns {
			got = append(got, sn.ID)
		}
		if !slices.Equal(got, want) {
			t.Errorf("keep %d: turns\n%v\nwant\n%v", keep, got, want)
		}
		wantOld := 0
		if len(usable) > keep {
			wantOld = usable[len(usable)-keep-1].Turn
		}
		if w.OldThrough != wantOld {
			t.Errorf("keep %d: old through %d, want %d", keep, w.OldThrough, wantOld)
		}
		if newest := usable[len(usable)-1].CreatedAt; !w.Newest.Equal(newest) {
			t.Errorf("keep %d: newest %v, want %v", keep, w.Newest, newest)
		}
	}
}
