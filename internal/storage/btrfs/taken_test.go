package btrfs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/warrenhq/warren/internal/storage"
)

// TestSnapshotTaken checks the early signal: Taken runs at most once,
// before Snapshot returns, at a point after which a write to the source no
// longer reaches the snapshot, even though the snapshot is still being
// written out. Another volume's many new files give the commit enough to
// write out for the watch to see the snapshot before the call returns; on a
// loaded machine the watch may still look too late (then Taken is rightly
// not called), so each case tries a few snapshots until one is seen early.
func TestSnapshotTaken(t *testing.T) {
	ctx := context.Background()
	s, src, vol := poolWithSource(t)
	must(t, os.WriteFile(filepath.Join(vol, "before"), []byte("1"), 0o644))
	other, err := s.Create(ctx, storage.Key{Kind: storage.KindSandbox, Name: "other"})
	must(t, err)
	const attempts = 8
	for i, group := range []string{"", "grp"} {
		calls := 0
		for a := 0; a < attempts && calls == 0; a++ {
			fillTree(t, filepath.Join(other, fmt.Sprint(i, "-", a)), 20000)
			snap := storage.Key{Kind: storage.KindSnapshot, Name: fmt.Sprint("snap", i, "-", a)}
			var writeErr error
			_, err = s.Snapshot(ctx, src, snap, storage.SnapshotOptions{ReadOnly: true, Group: group, Taken: func() {
				calls++
				writeErr = os.WriteFile(filepath.Join(vol, "after-"+snap.Name), []byte("2"), 0o644)
			}})
			must(t, err)
			must(t, writeErr)
			if calls > 1 {
				t.Fatalf("Taken called %d times, want at most 1", calls)
			}
			if calls == 0 {
				continue
			}
			p := s.Path(snap)
			if _, err := os.Stat(filepath.Join(p, "before")); err != nil {
				t.Errorf("snapshot lacks what was written before: %v", err)
			}
			if _, err := os.Stat(filepath.Join(p, "after-"+snap.Name)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("snapshot holds a file written after Taken: %v", err)
			}
			if _, err := os.Stat(filepath.Join(vol, "after-"+snap.Name)); err != nil {
				t.Errorf("source lost the write made in Taken: %v", err)
			}
		}
		if calls == 0 {
			t.Fatalf("group %q: Taken not called in %d snapshots", group, attempts)
		}
	}
}

// TestRootRefWatch checks the search itself, without timing: it finds a
// snapshot's ROOT_REF by name and directory above its floor, and nothing
// for another name or a floor at the snapshot's id.
func TestRootRefWatch(t *testing.T) {
	ctx := context.Background()
	s, src, _ := poolWithSource(t)
	snap := storage.Key{Kind: storage.KindSnapshot, Name: "snap"}
	_, err := s.Snapshot(ctx, src, snap, storage.SnapshotOptions{ReadOnly: true})
	must(t, err)
	ids := map[storage.Key]uint64{}
	for _, k := range []storage.Key{src, snap} {
		f, err := s.openSubvol(k)
		must(t, err)
		ids[k], err = subvolID(int(f.Fd()))
		f.Close()
		must(t, err)
	}
	dir, err := s.openKindDir(snap.Kind)
	must(t, err)
	defer dir.Close()
	parentTree, err := subvolID(int(dir.Fd()))
	must(t, err)
	dirIno, err := dirInode(int(dir.Fd()))
	must(t, err)
	watch := func(name string, floor uint64) (uint64, bool) {
		w := &rootRefWatch{fd: int(dir.Fd()), parentTree: parentTree, dirIno: dirIno, floor: floor, name: name}
		id, ok, err := w.found()
		must(t, err)
		return id, ok
	}
	if id, ok := watch("snap", ids[src]); !ok || id != ids[snap] {
		t.Errorf("found %d, %t; want the snapshot's id %d", id, ok, ids[snap])
	}
	if id, ok := watch("other", ids[src]); ok {
		t.Errorf("found %d for a name no snapshot has", id)
	}
	if id, ok := watch("snap", ids[snap]); ok {
		t.Errorf("found %d at or below the floor", id)
	}
}

// TestSnapshotTakenWatchCannotTell: when the watch cannot find the new
// subvolume (its floor is above every id, as after ids were reused), the
// snapshot is still made and Taken is simply not called.
func TestSnapshotTakenWatchCannotTell(t *testing.T) {
	ctx := context.Background()
	s, src, _ := poolWithSource(t)
	s.highestSubvol.Store(1 << 60)
	calls := 0
	snap := storage.Key{Kind: storage.KindSnapshot, Name: "snap"}
	_, err := s.Snapshot(ctx, src, snap, storage.SnapshotOptions{ReadOnly: true, Taken: func() { calls++ }})
	must(t, err)
	if calls != 0 {
		t.Errorf("Taken called %d times with a watch that cannot see the snapshot", calls)
	}
	if _, err := s.Stat(ctx, snap); err != nil {
		t.Errorf("snapshot missing: %v", err)
	}
}

// poolWithSource opens a pool holding one writable volume to snapshot.
func poolWithSource(t *testing.T) (*Storage, storage.Key, string) {
	t.Helper()
	s := newPool(t, t.TempDir())
	src := storage.Key{Kind: storage.KindSandbox, Name: "src"}
	vol, err := s.Create(context.Background(), src)
	must(t, err)
	return s, src, vol
}
