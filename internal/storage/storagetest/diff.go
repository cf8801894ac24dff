package storagetest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/storage"
)

// testDiff checks storage.Differ on backends that have it: two turns of a
// sandbox, the live volume, identical volumes, missing volumes.
func testDiff(t *testing.T, s storage.Storage) {
	d, ok := s.(storage.Differ)
	if !ok {
		t.Skipf("%s has no Diff", s.Name())
	}
	ctx := context.Background()
	live := mustCreate(t, s, sandbox("live"))
	writeFile(t, filepath.Join(live, "keep.txt"), "keep")
	writeFile(t, filepath.Join(live, "mod.txt"), "old")
	writeFile(t, filepath.Join(live, "chmod.txt"), "x")
	writeFile(t, filepath.Join(live, "gone", "a", "b.txt"), "b")
	writeFile(t, filepath.Join(live, "gone", "c.txt"), "c")
	must(t, os.Symlink("keep.txt", filepath.Join(live, "link")))
	_, err := s.Snapshot(ctx, sandbox("live"), snapshot("turn-1"), storage.SnapshotOptions{ReadOnly: true})
	must(t, err)

	// Every change also changes a size, mode or target: a backend that
	// copies may not see a new mtime within one clock tick.
	writeFile(t, filepath.Join(live, "mod.txt"), "newer")
	writeFile(t, filepath.Join(live, "new", "n.txt"), "n")
	must(t, os.Chmod(filepath.Join(live, "chmod.txt"), 0o600))
	must(t, os.RemoveAll(filepath.Join(live, "gone")))
	must(t, os.Remove(filepath.Join(live, "link")))
	must(t, os.Symlink("mod.txt", filepath.Join(live, "link")))
	_, err = s.Snapshot(ctx, sandbox("live"), snapshot("turn-2"), storage.SnapshotOptions{ReadOnly: true})
	must(t, err)

	got, err := d.Diff(ctx, snapshot("turn-1"), snapshot("turn-2"))
	must(t, err)
	checkSorted(t, got)
	want := []storage.Change{
		{Path: "/chmod.txt", Kind: storage.ChangeModified, Type: "file", Size: 1, OldSize: 1, Mode: 0o600, OldMode: 0o644},
		{Path: "/gone", Kind: storage.ChangeRemoved, Type: "dir", OldMode: 0o755},
		{Path: "/gone/a", Kind: storage.ChangeRemoved, Type: "dir", OldMode: 0o755},
		{Path: "/gone/a/b.txt", Kind: storage.ChangeRemoved, Type: "file", OldSize: 1, OldMode: 0o644},
		{Path: "/gone/c.txt", Kind: storage.ChangeRemoved, Type: "file", OldSize: 1, OldMode: 0o644},
		{Path: "/link", Kind: storage.ChangeModified, Type: "symlink", Size: 7, OldSize: 8, Mode: 0o777, OldMode: 0o777},
		{Path: "/mod.txt", Kind: storage.ChangeModified, Type: "file", Size: 5, OldSize: 3, Mode: 0o644, OldMode: 0o644},
		{Path: "/new", Kind: storage.ChangeAdded, Type: "dir", Mode: 0o755},
		{Path: "/new/n.txt", Kind: storage.ChangeAdded, Type: "file", Size: 1, Mode: 0o644},
	}
	// Directories whose entries changed may also be listed as modified
	// (a new mtime), depending on the clock: leave them out.
	if got := withoutModifiedDirs(got); !reflect.DeepEqual(got, want) {
		t.Errorf("turn-1 -> turn-2:\n got %+v\nwant %+v", got, want)
	}

	// The other way round, additions and removals swap.
	back, err := d.Diff(ctx, snapshot("turn-2"), snapshot("turn-1"))
	must(t, err)
	checkSorted(t, back)
	kinds := map[string]storage.ChangeKind{}
	for _, c := range withoutModifiedDirs(back) {
		kinds[c.Path] = c.Kind
	}
	if kinds["/gone/c.txt"] != storage.ChangeAdded || kinds["/new/n.txt"] != storage.ChangeRemoved || kinds["/mod.txt"] != storage.ChangeModified {
		t.Errorf("turn-2 -> turn-1: %+v", back)
	}

	// Nothing changed since turn-2: the live volume equals it.
	for _, pair := range [][2]storage.Key{{snapshot("turn-2"), sandbox("live")}, {snapshot("turn-1"), snapshot("turn-1")}} {
		same, err := d.Diff(ctx, pair[0], pair[1])
		must(t, err)
		if same == nil || len(same) != 0 {
			t.Errorf("%s -> %s: got %+v, want an empty list", pair[0], pair[1], same)
		}
	}

	for _, pair := range [][2]storage.Key{{snapshot("nope"), snapshot("turn-1")}, {snapshot("turn-1"), sandbox("nope")}} {
		if _, err := d.Diff(ctx, pair[0], pair[1]); !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("%s -> %s: got %v, want ErrNotFound", pair[0], pair[1], err)
		}
	}
	if _, err := d.Diff(ctx, storage.Key{Kind: "bad", Name: "x"}, snapshot("turn-1")); !errors.Is(err, errdefs.ErrInvalid) {
		t.Errorf("bad key: got %v, want ErrInvalid", err)
	}
}

func withoutModifiedDirs(cs []storage.Change) []storage.Change {
	var out []storage.Change
	for _, c := range cs {
		if c.Kind == storage.ChangeModified && c.Type == "dir" {
			continue
		}
		out = append(out, c)
	}
	return out
}

func checkSorted(t *testing.T, cs []storage.Change) {
	t.Helper()
	if !sort.SliceIsSorted(cs, func(i, j int) bool { return cs[i].Path < cs[j].Path }) {
		t.Errorf("changes are not sorted by path: %+v", cs)
	}
}
