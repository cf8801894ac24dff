package btrfs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/storage"
	"github.com/warrenhq/warren/internal/storage/treediff"
	"github.com/warrenhq/warren/internal/testutil"
)

// TestArchiveRestore sends a snapshot as a delta against an older one,
// deletes it, receives it back and checks the tree is the same, metadata
// and bytes.
func TestArchiveRestore(t *testing.T) {
	ctx, s, live := archivePool(t)
	fillTree(t, live, 200)
	must(t, os.WriteFile(filepath.Join(live, "keep"), []byte("unchanged"), 0o600))
	mustSnapshot(t, s, sandboxKey("live"), snapshotKey("anchor"), true)

	// Changes of every kind between the anchor and the archived snapshot.
	must(t, os.WriteFile(filepath.Join(live, "d1", "f1"), []byte("rewritten"), 0o644))
	must(t, os.Remove(filepath.Join(live, "d2", "f2")))
	must(t, os.RemoveAll(filepath.Join(live, "d3")))
	must(t, os.MkdirAll(filepath.Join(live, "new", "deep"), 0o750))
	must(t, os.WriteFile(filepath.Join(live, "new", "deep", "big"), make([]byte, 3<<20), 0o640))
	must(t, os.Symlink("../keep", filepath.Join(live, "new", "link")))
	must(t, os.Chmod(filepath.Join(live, "d4"), 0o700))
	must(t, os.Chown(filepath.Join(live, "keep"), 1234, 5678))
	must(t, os.Rename(filepath.Join(live, "d5", "f5"), filepath.Join(live, "moved")))
	mustSnapshot(t, s, sandboxKey("live"), snapshotKey("turn"), true)
	// The reference keeps the archived snapshot's tree after it is deleted.
	mustSnapshot(t, s, snapshotKey("turn"), snapshotKey("ref"), true)

	dst := filepath.Join(s.ArchiveDir(), "turn.stream")
	must(t, s.Archive(ctx, snapshotKey("turn"), snapshotKey("anchor"), dst))
	if _, err := os.Stat(dst + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("temporary stream left behind: %v", err)
	}
	must(t, s.Delete(ctx, snapshotKey("turn")))

	start := time.Now()
	must(t, s.Restore(ctx, []string{dst}, snapshotKey("anchor"), snapshotKey("turn")))
	t.Logf("restore took %v (stream %d bytes)", time.Since(start), fileSize(t, dst))
	info, err := s.Stat(ctx, snapshotKey("turn"))
	must(t, err)
	if !info.ReadOnly {
		t.Error("restored volume is writable")
	}
	assertSameTree(t, s.Path(snapshotKey("ref")), info.Path)
	if scratch, err := s.List(ctx, storage.KindScratch); err != nil || len(scratch) != 0 {
		t.Errorf("scratch volumes left: %v, %v", scratch, err)
	}

	// A restored volume can be archived again and serves as a source.
	mustSnapshot(t, s, snapshotKey("turn"), sandboxKey("rolled-back"), false)
	if err := s.Restore(ctx, []string{dst}, snapshotKey("anchor"), snapshotKey("turn")); !errdefs.IsAlreadyExists(err) {
		t.Errorf("restore over an existing volume: %v, want ErrAlreadyExists", err)
	}

	// Without its parent a stream cannot be received: a clear error, and
	// nothing left behind.
	must(t, s.Delete(ctx, snapshotKey("turn")))
	must(t, s.Delete(ctx, snapshotKey("anchor")))
	err = s.Restore(ctx, []string{dst}, snapshotKey("anchor"), snapshotKey("turn"))
	if !errdefs.IsNotFound(err) {
		t.Errorf("restore without the parent: %v, want ErrNotFound", err)
	}
	t.Logf("missing parent: %v", err)
	// Another volume under the parent's name is not the parent: receive
	// looks it up by UUID and does not find it.
	mustSnapshot(t, s, sandboxKey("live"), snapshotKey("anchor"), true)
	err = s.Restore(ctx, []string{dst}, snapshotKey("anchor"), snapshotKey("turn"))
	if !errdefs.IsNotFound(err) {
		t.Errorf("restore against an impostor parent: %v, want ErrNotFound", err)
	}
	if _, err := s.Stat(ctx, snapshotKey("turn")); !errdefs.IsNotFound(err) {
		t.Errorf("failed restore left a volume: %v", err)
	}
	if scratch, err := s.List(ctx, storage.KindScratch); err != nil || len(scratch) != 0 {
		t.Errorf("scratch volumes left after failed restores: %v, %v", scratch, err)
	}
	if err := s.Archive(ctx, sandboxKey("live"), snapshotKey("anchor"), dst); !errdefs.IsInvalid(err) {
		t.Errorf("archive of a writable volume: %v, want ErrInvalid", err)
	}
}

// archivePool is a fresh pool holding a writable volume "live", for the
// archive and restore tests.
func archivePool(t *testing.T) (context.Context, *Storage, string) {
	t.Helper()
	testutil.RequireBinary(t, "btrfs")
	s := newPool(t, t.TempDir())
	live, err := s.Create(context.Background(), sandboxKey("live"))
	must(t, err)
	return context.Background(), s, live
}

// streamPath is where the tests keep turn n's stream.
func streamPath(s *Storage, n int) string {
	return filepath.Join(s.ArchiveDir(), fmt.Sprintf("t%d.stream", n))
}

func fileSize(t *testing.T, p string) int64 {
	st, err := os.Stat(p)
	must(t, err)
	return st.Size()
}

// assertSameTree compares two trees by metadata (not inode numbers: a
// received tree has new ones) and by the bytes of every regular file.
func assertSameTree(t *testing.T, want, got string) {
	t.Helper()
	changes, err := treediff.Walk(context.Background(), want, got, treediff.Options{})
	must(t, err)
	for _, c := range changes {
		t.Errorf("restored tree differs: %s %s", c.Kind, c.Path)
	}
	a, b := hashTree(t, want), hashTree(t, got)
	if len(a) != len(b) {
		t.Errorf("restored tree has %d files, want %d", len(b), len(a))
	}
	for p, h := range a {
		if b[p] != h {
			t.Errorf("content of %s differs", p)
		}
	}
}

func hashTree(t *testing.T, root string) map[string]string {
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		rel, _ := filepath.Rel(root, p)
		out[rel] = hex.EncodeToString(sum[:])
		return nil
	})
	must(t, err)
	return out
}

// TestArchiveChain archives each of several snapshots against the one
// before and rebuilds them from the chain: in one receive from the first
// parent, link by link from a restored volume, and a restored volume serves
// as the parent of a later send.
func TestArchiveChain(t *testing.T) {
	ctx, s, live := archivePool(t)
	fillTree(t, live, 100)
	mustSnapshot(t, s, sandboxKey("live"), snapshotKey("t0"), true)
	stream := func(n int) string { return streamPath(s, n) }
	const links = 5
	for n := 1; n <= links; n++ {
		must(t, os.WriteFile(filepath.Join(live, fmt.Sprintf("d%d", n), "f0"), []byte(fmt.Sprintf("turn %d", n)), 0o644))
		must(t, os.WriteFile(filepath.Join(live, fmt.Sprintf("new%d", n)), make([]byte, 64<<10), 0o600))
		must(t, os.Remove(filepath.Join(live, fmt.Sprintf("d%d", (n+50)%10), fmt.Sprintf("f%d", n+50))))
		mustSnapshot(t, s, sandboxKey("live"), snapshotKey(fmt.Sprintf("t%d", n)), true)
		mustSnapshot(t, s, snapshotKey(fmt.Sprintf("t%d", n)), snapshotKey(fmt.Sprintf("ref%d", n)), true)
		must(t, s.Archive(ctx, snapshotKey(fmt.Sprintf("t%d", n)), snapshotKey(fmt.Sprintf("t%d", n-1)), stream(n)))
	}
	for n := 1; n <= links; n++ {
		must(t, s.Delete(ctx, snapshotKey(fmt.Sprintf("t%d", n))))
	}
	var chain []string
	for n := 1; n <= links; n++ {
		chain = append(chain, stream(n))
	}
	start := time.Now()
	must(t, s.Restore(ctx, chain, snapshotKey("t0"), snapshotKey("t5")))
	t.Logf("restore through %d streams took %v", links, time.Since(start))
	assertSameTree(t, s.Path(snapshotKey("ref5")), s.Path(snapshotKey("t5")))

	// Link by link: t2 from t0, then t3 from the restored t2.
	must(t, s.Restore(ctx, chain[:2], snapshotKey("t0"), snapshotKey("t2")))
	must(t, s.Restore(ctx, chain[2:3], snapshotKey("t2"), snapshotKey("t3")))
	assertSameTree(t, s.Path(snapshotKey("ref3")), s.Path(snapshotKey("t3")))

	// A restored volume as the parent of a send, and that stream restores.
	must(t, os.WriteFile(filepath.Join(live, "after"), []byte("six"), 0o644))
	mustSnapshot(t, s, sandboxKey("live"), snapshotKey("t6"), true)
	mustSnapshot(t, s, snapshotKey("t6"), snapshotKey("ref6"), true)
	must(t, s.Archive(ctx, snapshotKey("t6"), snapshotKey("t5"), stream(6)))
	must(t, s.Delete(ctx, snapshotKey("t6")))
	must(t, s.Restore(ctx, []string{stream(6)}, snapshotKey("t5"), snapshotKey("t6")))
	assertSameTree(t, s.Path(snapshotKey("ref6")), s.Path(snapshotKey("t6")))

	// A chain that does not rebuild the key: refused, nothing left.
	must(t, s.Delete(ctx, snapshotKey("t3")))
	if err := s.Restore(ctx, chain[:1], snapshotKey("t0"), snapshotKey("t3")); !errdefs.IsInvalid(err) {
		t.Errorf("restore of t3 from t1's stream: %v, want ErrInvalid", err)
	}
	if err := s.Restore(ctx, nil, snapshotKey("t2"), snapshotKey("t3")); !errdefs.IsInvalid(err) {
		t.Errorf("restore from no stream: %v, want ErrInvalid", err)
	}
	if scratch, err := s.List(ctx, storage.KindScratch); err != nil || len(scratch) != 0 {
		t.Errorf("scratch volumes left: %v, %v", scratch, err)
	}
}
