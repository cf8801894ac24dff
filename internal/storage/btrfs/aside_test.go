package btrfs

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/storage"
)

// TestDeleteAside drops a volume through its own directory (a nested
// subvolume and a read-only flag included), refuses what is not there, and
// a pool opened again sweeps what a crash left in .dropping. It logs how
// long a snapshot into the same kind directory took while a volume with
// cached inodes was being deleted in place and aside (context only).
func TestDeleteAside(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := newPool(t, dir)
	var a storage.AsideDeleter = s
	k := storage.Key{Kind: storage.KindScratch, Name: "old-root"}
	p, err := s.Create(ctx, k)
	must(t, err)
	mkSubvol(t, p, "inner")
	must(t, s.SetReadOnly(ctx, k, true))
	must(t, a.DeleteAside(ctx, k))
	if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("volume still there: %v", err)
	}
	assertDroppingEmpty(t, s.volumes.root)
	if err := a.DeleteAside(ctx, k); !errdefs.IsNotFound(err) {
		t.Fatalf("delete of a missing volume: %v, want not found", err)
	}
	must(t, os.Mkdir(filepath.Join(s.volumes.root, string(storage.KindScratch), "plain"), 0o700))
	if err := a.DeleteAside(ctx, storage.Key{Kind: storage.KindScratch, Name: "plain"}); !errdefs.IsConflict(err) {
		t.Fatalf("delete of a plain directory: %v, want a conflict", err)
	}

	// A crash between the move and the delete: a volume in .dropping/<nonce>/vol,
	// and a nonce directory with nothing in it.
	left := storage.Key{Kind: storage.KindScratch, Name: "left"}
	lp, err := s.Create(ctx, left)
	must(t, err)
	fillTree(t, lp, 50)
	own := filepath.Join(s.volumes.root, droppingDir, "crashed")
	must(t, os.MkdirAll(own, 0o700))
	must(t, os.Rename(lp, filepath.Join(own, droppedName)))
	must(t, os.MkdirAll(filepath.Join(s.volumes.root, droppingDir, "empty"), 0o700))
	s2, err := Open(ctx, Options{DataDir: dir, ImageSize: testImageSize, Logger: testLogger(t)})
	must(t, err)
	must(t, s2.Close())
	assertDroppingEmpty(t, s.volumes.root)

	blockedWhileDeleting(t, s, false)
	blockedWhileDeleting(t, s, true)
}

func assertDroppingEmpty(t *testing.T, root string) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(root, droppingDir))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Fatalf(".dropping holds %d entries after the delete, want none", len(entries))
	}
}

// blockedWhileDeleting logs how long a snapshot into scratch/ takes while a
// 20k-file volume whose inodes are cached is deleted (aside or in place).
func blockedWhileDeleting(t *testing.T, s *Storage, aside bool) {
	ctx := context.Background()
	old := storage.Key{Kind: storage.KindScratch, Name: "cached"}
	p, err := s.Create(ctx, old)
	must(t, err)
	fillTree(t, p, 20000)
	must(t, filepath.WalkDir(p, func(string, fs.DirEntry, error) error { return nil }))
	src := storage.Key{Kind: storage.KindSandbox, Name: "src"}
	if _, err := s.Stat(ctx, src); err != nil {
		_, err = s.Create(ctx, src)
		must(t, err)
	}
	del := s.Delete
	if aside {
		del = s.DeleteAside
	}
	done := make(chan error, 1)
	go func() { done <- del(ctx, old) }()
	time.Sleep(2 * time.Millisecond) // let the delete begin
	start := time.Now()
	copyKey := storage.Key{Kind: storage.KindScratch, Name: "copy"}
	_, err = s.Snapshot(ctx, src, copyKey, storage.SnapshotOptions{})
	took := time.Since(start)
	must(t, err)
	must(t, <-done)
	must(t, s.Delete(ctx, copyKey))
	t.Logf("aside=%v: a snapshot into scratch/ during the delete took %v", aside, took.Round(time.Microsecond))
}
