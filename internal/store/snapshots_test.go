package store

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
)

func testSnapshot(id, sandbox string) Snapshot {
	return Snapshot{
		ID: id, Team: "default", SandboxID: sandbox, Family: sandbox, Kind: SnapshotImplicit,
		Template: "base", State: SnapshotReady, ExclusiveBytes: -1, ReferencedBytes: -1,
	}
}

func TestSnapshotCRUD(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	at := time.Date(2025, 5, 6, 7, 8, 9, 10, time.UTC)
	want := Snapshot{
		ID: "snap1", Team: "acme", SandboxID: "sb1", Family: "root1", Name: "before-refactor",
		Kind: SnapshotNamed, ParentID: "snap0", Template: "base", State: SnapshotCreating,
		Labels:         map[string]string{"by": "alice"},
		ExclusiveBytes: -1, ReferencedBytes: -1, CreatedAt: at,
	}
	if err := s.CreateSnapshot(ctx, want); err != nil {
		t.Fatalf("CreateSnapshot: %v", err)
	}
	got, err := s.GetSnapshot(ctx, "snap1")
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("GetSnapshot =\n%+v, %v\nwant\n%+v", got, err, want)
	}
	if err := s.CreateSnapshot(ctx, testSnapshot("snap1", "sb2")); !errdefs.IsAlreadyExists(err) {
		t.Errorf("duplicate id: %v, want ErrAlreadyExists", err)
	}
	if _, err := s.GetSnapshot(ctx, "nope"); !errdefs.IsNotFound(err) {
		t.Errorf("GetSnapshot of a missing id: %v, want ErrNotFound", err)
	}

	// Turn snapshots are named for their turn.
	turn := testSnapshot("snap2", "sb1")
	turn.Kind, turn.Turn = SnapshotTurn, 12
	if err := s.CreateSnapshot(ctx, turn); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetSnapshot(ctx, "snap2"); got.Name != "turn-12" || got.Labels == nil {
		t.Errorf("turn snapshot name = %q labels %#v, want turn-12 and an empty map", got.Name, got.Labels)
	}

	if err := s.SetSnapshotSizes(ctx, "snap1", 4096, 1<<20); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetSnapshot(ctx, "snap1"); got.ExclusiveBytes != 4096 || got.ReferencedBytes != 1<<20 {
		t.Errorf("sizes = %d/%d, want 4096/%d", got.ExclusiveBytes, got.ReferencedBytes, 1<<20)
	}
	if err := s.SetSnapshotSizes(ctx, "nope", 1, 1); !errdefs.IsNotFound(err) {
		t.Errorf("SetSnapshotSizes of a missing id: %v, want ErrNotFound", err)
	}
	if err := s.SetSnapshotSizes(ctx, "snap1", -2, 1); !errdefs.IsInvalid(err) {
		t.Errorf("SetSnapshotSizes(-2): %v, want ErrInvalid", err)
	}
}

func TestSnapshotValidation(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	for name, mut := range map[string]func(*Snapshot){
		"bad id":            func(sn *Snapshot) { sn.ID = "Snap1" },
		"no team":           func(sn *Snapshot) { sn.Team = "" },
		"no sandbox":        func(sn *Snapshot) { sn.SandboxID = "" },
		"no family":         func(sn *Snapshot) { sn.Family = "" },
		"no template":       func(sn *Snapshot) { sn.Template = "" },
		"bad parent":        func(sn *Snapshot) { sn.ParentID = "a/b" },
		"bad state":         func(sn *Snapshot) { sn.State = "gone" },
		"bad kind":          func(sn *Snapshot) { sn.Kind = "auto" },
		"bad name":          func(sn *Snapshot) { sn.Name = "-x" },
		"slash name":        func(sn *Snapshot) { sn.Name = "a/b" },
		"named no name":     func(sn *Snapshot) { sn.Kind = SnapshotNamed },
		"turn no number":    func(sn *Snapshot) { sn.Kind = SnapshotTurn },
		"turn wrong name":   func(sn *Snapshot) { sn.Kind, sn.Turn, sn.Name = SnapshotTurn, 3, "turn-4" },
		"turn number named": func(sn *Snapshot) { sn.Kind, sn.Turn, sn.Name = SnapshotNamed, 3, "x" },
		"reserved name":     func(sn *Snapshot) { sn.Kind, sn.Name = SnapshotNamed, "turn-7" },
		"size below -1":     func(sn *Snapshot) { sn.ExclusiveBytes = -2 },
		"bad labels":        func(sn *Snapshot) { sn.Labels = map[string]string{"k": "\xff"} },
	} {
		sn := testSnapshot("snap1", "sb1")
		mut(&sn)
		if err := s.CreateSnapshot(ctx, sn); !errdefs.IsInvalid(err) {
			t.Errorf("%s: CreateSnapshot = %v, want ErrInvalid", name, err)
		}
	}
	if n, _ := s.CountSnapshots(ctx, "sb1"); n != 0 {
		t.Errorf("%d invalid snapshots were stored", n)
	}
}

func TestSnapshotNames(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	named := func(id, team, sandbox, name string) Snapshot {
		sn := testSnapshot(id, sandbox)
		sn.Team, sn.Kind, sn.Name = team, SnapshotNamed, name
		return sn
	}
	if err := s.CreateSnapshot(ctx, named("a1", "acme", "sb1", "good")); err != nil {
		t.Fatal(err)
	}
	// Unique per team, whichever sandbox it is of.
	if err := s.CreateSnapshot(ctx, named("a2", "acme", "sb2", "good")); !errdefs.IsAlreadyExists(err) {
		t.Errorf("dup name in a team: %v, want ErrAlreadyExists", err)
	}
	if err := s.CreateSnapshot(ctx, named("b1", "other", "sb3", "good")); err != nil {
		t.Errorf("same name in another team: %v", err)
	}
	got, err := s.GetSnapshotByName(ctx, "acme", "good")
	if err != nil || got.ID != "a1" {
		t.Errorf("GetSnapshotByName(acme, good) = %s, %v; want a1", got.ID, err)
	}
	// A deleted snapshot frees its name, and is no longer found by it.
	if err := s.UpdateSnapshotState(ctx, "a1", nil, SnapshotDeleted); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetSnapshotByName(ctx, "acme", "good"); !errdefs.IsNotFound(err) {
		t.Errorf("GetSnapshotByName of a deleted snapshot: %v, want ErrNotFound", err)
	}
	if err := s.CreateSnapshot(ctx, named("a2", "acme", "sb2", "good")); err != nil {
		t.Errorf("reusing a deleted snapshot's name: %v", err)
	}
	if got, err := s.GetSnapshotByName(ctx, "acme", "good"); err != nil || got.ID != "a2" {
		t.Errorf("GetSnapshotByName after reuse = %s, %v; want a2", got.ID, err)
	}
	// Bringing the old one back would give the team two of the name.
	if err := s.UpdateSnapshotState(ctx, "a1", nil, SnapshotReady); !errdefs.IsAlreadyExists(err) {
		t.Errorf("undeleting into a taken name: %v, want ErrAlreadyExists", err)
	}
	// Unnamed snapshots never collide.
	for _, id := range []string{"u1", "u2"} {
		if err := s.CreateSnapshot(ctx, testSnapshot(id, "sb1")); err != nil {
			t.Errorf("unnamed snapshot %s: %v", id, err)
		}
	}

	// Turn names are per sandbox: every sandbox has its own turn-1.
	turn := func(id, sandbox string, n int) Snapshot {
		sn := testSnapshot(id, sandbox)
		sn.Team, sn.Kind, sn.Turn = "acme", SnapshotTurn, n
		return sn
	}
	if err := s.CreateSnapshot(ctx, turn("t1", "sb1", 1)); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateSnapshot(ctx, turn("t2", "sb2", 1)); err != nil {
		t.Errorf("turn-1 of a second sandbox in the team: %v", err)
	}
	if err := s.CreateSnapshot(ctx, turn("t3", "sb1", 1)); !errdefs.IsAlreadyExists(err) {
		t.Errorf("second turn-1 of one sandbox: %v, want ErrAlreadyExists", err)
	}
	if _, err := s.GetSnapshotByName(ctx, "acme", "turn-1"); !errdefs.IsConflict(err) {
		t.Errorf("GetSnapshotByName of a turn name two sandboxes have: %v, want ErrConflict", err)
	}
	if l, err := s.ListSnapshots(ctx, SnapshotFilter{SandboxID: "sb2", Name: "turn-1"}); err != nil || len(l) != 1 || l[0].ID != "t2" {
		t.Errorf("turn-1 of sb2 = %v, %v; want t2", snapshotIDs(l), err)
	}
	if _, err := s.GetSnapshotByName(ctx, "acme", "nope"); !errdefs.IsNotFound(err) {
		t.Errorf("GetSnapshotByName of an unknown name: %v, want ErrNotFound", err)
	}
}

func TestSnapshotStateCAS(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	sn := testSnapshot("snap1", "sb1")
	sn.State = SnapshotCreating
	if err := s.CreateSnapshot(ctx, sn); err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateSnapshotState(ctx, "snap1", []SnapshotState{SnapshotCreating}, SnapshotReady); err != nil {
		t.Fatal(err)
	}
	err := s.UpdateSnapshotState(ctx, "snap1", []SnapshotState{SnapshotCreating}, SnapshotReady)
	if !errdefs.IsConflict(err) {
		t.Errorf("CAS from a state it is not in: %v, want ErrConflict", err)
	}
	if err := s.UpdateSnapshotState(ctx, "nope", nil, SnapshotReady); !errdefs.IsNotFound(err) {
		t.Errorf("missing snapshot: %v, want ErrNotFound", err)
	}
	if err := s.UpdateSnapshotState(ctx, "snap1", nil, "gone"); !errdefs.IsInvalid(err) {
		t.Errorf("unknown state: %v, want ErrInvalid", err)
	}
	before := time.Now()
	if err := s.UpdateSnapshotState(ctx, "snap1", []SnapshotState{SnapshotReady}, SnapshotDeleted); err != nil {
		t.Fatal(err)
	}
	got, _ := s.GetSnapshot(ctx, "snap1")
	if got.State != SnapshotDeleted || got.DeletedAt.Before(before) {
		t.Errorf("after delete: state %s DeletedAt %v, want deleted and about now", got.State, got.DeletedAt)
	}
	if err := s.UpdateSnapshotState(ctx, "snap1", nil, SnapshotReady); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetSnapshot(ctx, "snap1"); !got.DeletedAt.IsZero() {
		t.Errorf("DeletedAt = %v after undelete, want zero", got.DeletedAt)
	}
}

func TestListSnapshots(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	// 12 snapshots: teams alternate, sandboxes in threes, two families, and
	// pairs share a creation time so paging has to break ties by id.
	for i := range 12 {
		sn := testSnapshot(fmt.Sprintf("s%02d", i), fmt.Sprintf("sb%d", i/3))
		sn.Team = []string{"acme", "other"}[i%2]
		sn.Family = []string{"fa", "fb"}[i/6]
		sn.CreatedAt = base.Add(time.Duration(i/2) * time.Second)
		if i%4 == 0 {
			sn.Kind, sn.Name = SnapshotNamed, fmt.Sprintf("n%d", i)
		}
		if i == 11 {
			sn.State = SnapshotDeleted
		}
		if err := s.CreateSnapshot(ctx, sn); err != nil {
			t.Fatal(err)
		}
	}
	for name, c := range map[string]struct {
		f    SnapshotFilter
		want []string
	}{
		"all":        {SnapshotFilter{}, []string{"s00", "s01", "s02", "s03", "s04", "s05", "s06", "s07", "s08", "s09", "s10", "s11"}},
		"team":       {SnapshotFilter{Team: "acme"}, []string{"s00", "s02", "s04", "s06", "s08", "s10"}},
		"sandbox":    {SnapshotFilter{SandboxID: "sb1"}, []string{"s03", "s04", "s05"}},
		"family":     {SnapshotFilter{Family: "fb"}, []string{"s06", "s07", "s08", "s09", "s10", "s11"}},
		"name":       {SnapshotFilter{Name: "n8"}, []string{"s08"}},
		"kind":       {SnapshotFilter{Kinds: []SnapshotKind{SnapshotNamed}}, []string{"s00", "s04", "s08"}},
		"state":      {SnapshotFilter{States: []SnapshotState{SnapshotDeleted}}, []string{"s11"}},
		"combined":   {SnapshotFilter{Team: "other", Family: "fb", States: []SnapshotState{SnapshotReady}}, []string{"s07", "s09"}},
		"limit":      {SnapshotFilter{Family: "fa", Limit: 2}, []string{"s00", "s01"}},
		"after id":   {SnapshotFilter{After: "s08"}, []string{"s09", "s10", "s11"}},
		"after+team": {SnapshotFilter{Team: "acme", After: "s03", Limit: 2}, []string{"s04", "s06"}},
		"nothing":    {SnapshotFilter{SandboxID: "sb9"}, nil},
	} {
		got, err := s.ListSnapshots(ctx, c.f)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if ids := snapshotIDs(got); !reflect.DeepEqual(ids, c.want) {
			t.Errorf("%s: %v, want %v", name, ids, c.want)
		}
	}

	// Page through with Cursor(): ties in creation time across a page
	// boundary must neither repeat nor skip a snapshot.
	var paged []string
	after := ""
	for range 20 {
		page, err := s.ListSnapshots(ctx, SnapshotFilter{Limit: 5, After: after})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		paged = append(paged, snapshotIDs(page)...)
		after = page[len(page)-1].Cursor()
	}
	if len(paged) != 12 || paged[0] != "s00" || paged[11] != "s11" {
		t.Errorf("paged = %v, want all 12 in order", paged)
	}
	if _, err := s.ListSnapshots(ctx, SnapshotFilter{After: "gone"}); !errdefs.IsInvalid(err) {
		t.Errorf("cursor at a missing snapshot: %v, want ErrInvalid", err)
	}
	if _, err := s.ListSnapshots(ctx, SnapshotFilter{Limit: -1}); !errdefs.IsInvalid(err) {
		t.Errorf("negative limit: %v, want ErrInvalid", err)
	}
	if _, err := s.ListSnapshots(ctx, SnapshotFilter{SandboxID: "../x"}); !errdefs.IsInvalid(err) {
		t.Errorf("bad sandbox filter: %v, want ErrInvalid", err)
	}

	if n, err := s.CountSnapshots(ctx, "sb3"); err != nil || n != 3 {
		t.Errorf("CountSnapshots(sb3) = %d, %v; want 3", n, err)
	}
	if n, err := s.CountSnapshots(ctx, "sb3", SnapshotReady, SnapshotCreating); err != nil || n != 2 {
		t.Errorf("CountSnapshots(sb3, live) = %d, %v; want 2", n, err)
	}
}

func snapshotIDs(l []Snapshot) []string {
	var out []string
	for _, sn := range l {
		out = append(out, sn.ID)
	}
	return out
}

// TestSnapshotTaken: the snapshot becomes ready, its sandbox's head and its
// snapshot-of edge in one transaction; a snapshot not being made changes
// none of the three.
func TestSnapshotTaken(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	if err := s.CreateSandbox(ctx, testSandbox("sb1")); err != nil {
		t.Fatal(err)
	}
	sn := testSnapshot("snap1", "sb1")
	sn.State = SnapshotCreating
	if err := s.CreateSnapshot(ctx, sn); err != nil {
		t.Fatal(err)
	}
	edge := LineageEdge{Family: "sb1", Kind: EdgeSnapshotOf, From: "snap1", To: "sb1"}
	if err := s.SnapshotTaken(ctx, "snap1", "sb1", edge); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetSnapshot(ctx, "snap1"); got.State != SnapshotReady {
		t.Errorf("state %s, want ready", got.State)
	}
	if got, _ := s.GetSandbox(ctx, "sb1"); got.Head != "snap1" {
		t.Errorf("head %q, want snap1", got.Head)
	}
	edges, err := s.ListLineage(ctx, "sb1")
	if err != nil || len(edges) != 1 || edges[0].From != "snap1" || edges[0].Kind != EdgeSnapshotOf {
		t.Fatalf("lineage %+v, %v; want the one snapshot-of edge", edges, err)
	}

	// Ready already: refused, and nothing else moves.
	if err := s.SetSandboxHead(ctx, "sb1", ""); err != nil {
		t.Fatal(err)
	}
	if err := s.SnapshotTaken(ctx, "snap1", "sb1", edge); !errdefs.IsConflict(err) {
		t.Errorf("second SnapshotTaken: %v, want ErrConflict", err)
	}
	// A sandbox that is gone: the snapshot stays creating.
	sn2 := testSnapshot("snap2", "sb1")
	sn2.State = SnapshotCreating
	if err := s.CreateSnapshot(ctx, sn2); err != nil {
		t.Fatal(err)
	}
	if err := s.SnapshotTaken(ctx, "snap2", "nope", edge); !errdefs.IsNotFound(err) {
		t.Errorf("SnapshotTaken for a missing sandbox: %v, want ErrNotFound", err)
	}
	if got, _ := s.GetSnapshot(ctx, "snap2"); got.State != SnapshotCreating {
		t.Errorf("snap2 is %s after a failed SnapshotTaken, want creating", got.State)
	}
	if got, _ := s.GetSandbox(ctx, "sb1"); got.Head != "" {
		t.Errorf("head %q after refused SnapshotTaken calls, want unchanged (empty)", got.Head)
	}
	if edges, _ := s.ListLineage(ctx, "sb1"); len(edges) != 1 {
		t.Errorf("%d edges after refused SnapshotTaken calls, want 1", len(edges))
	}
}

// SnapshotTotals counts ready and archived snapshots and sums the sizes
// known; one being taken or deleted does not count.
func TestSnapshotTotals(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	for i, c := range []struct {
		state     SnapshotState
		exclusive int64
	}{{SnapshotReady, 100}, {SnapshotArchived, 20}, {SnapshotReady, -1}, {SnapshotCreating, 1000}, {SnapshotDeleted, 1000}} {
		snap := testSnapshot(fmt.Sprintf("snap%d", i), "sb1")
		snap.State, snap.ExclusiveBytes = c.state, c.exclusive
		if err := s.CreateSnapshot(ctx, snap); err != nil {
			t.Fatal(err)
		}
	}
	if n, b, err := s.SnapshotTotals(ctx); err != nil || n != 3 || b != 120 {
		t.Fatalf("totals %d, %d bytes, %v; want 3, 120", n, b, err)
	}
}
