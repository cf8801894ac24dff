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

// TestSnapshotTaken checks the early signal: Taken runs once, before
// Snapshot returns, at a point after which a write to the source no longer
// reaches the snapshot, even though the snapshot is still being written
// out. Another volume's many new files give the commit enough to write out
// for the watch to see the snapshot before the call returns.
func TestSnapshotTaken(t *testing.T) {
	ctx := context.Background()
	s, src, vol := poolWithSource(t)
	must(t, os.WriteFile(filepath.Join(vol, "before"), []byte("1"), 0o644))
	other, err := s.Create(ctx, storage.Key{Kind: storage.KindSandbox, Name: "other"})
	must(t, err)
	for i, group := range []string{"", "grp"} {
		fillTree(t, filepath.Join(other, fmt.Sprint(i)), 20000)
		snap := storage.Key{Kind: storage.KindSnapshot, Name: fmt.Sprint("snap", i)}
		calls := 0
		var writeErr error
		_, err = s.Snapshot(ctx, src, snap, storage.SnapshotOptions{ReadOnly: true, Group: group, Taken: func() {
			calls++
			writeErr = os.WriteFile(filepath.Join(vol, "after-"+snap.Name), []byte("2"), 0o644)
		}})
		must(t, err)
		must(t, writeErr)
		if calls != 1 {
			t.Fatalf("Taken called %d times, want 1", calls)
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
