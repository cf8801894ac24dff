package btrfs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/storage"
)

// groupOf returns the qgroup N the table maps group to.
func groupOf(t testing.TB, s *Storage, group string) uint64 {
	t.Helper()
	tab, err := s.openGroupTable()
	if err != nil {
		t.Fatal(err)
	}
	defer tab.close()
	n, ok := tab.groups[group]
	if !ok {
		t.Fatalf("group %s not in the table", group)
	}
	return n
}

// members lists the subvolume ids in qgroup 1/n.
func members(t testing.TB, s *Storage, n uint64) []uint64 {
	t.Helper()
	f, err := os.Open(s.Root())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := searchOffsets(int(f.Fd()), quotaTreeObjectID, qgroupID(1, n), qgroupRelationKey)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func volumeID(t testing.TB, s *Storage, k storage.Key) uint64 {
	t.Helper()
	f, err := s.openSubvol(k)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	id, err := subvolID(int(f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func TestQuotaGroupsSurviveRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := newPool(t, dir)
	base := storage.Key{Kind: storage.KindTemplate, Name: "base"}
	live := storage.Key{Kind: storage.KindSandbox, Name: "live"}
	if _, err := s.Create(ctx, base); err != nil {
		t.Fatal(err)
	}
	p, err := s.Snapshot(ctx, base, live, storage.SnapshotOptions{Group: "keep"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetGroupLimit(ctx, "keep", 10<<20); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p, "two"), make([]byte, 2<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	unix.Sync()
	n := groupOf(t, s, "keep")
	if got := members(t, s, n); !slices.Contains(got, volumeID(t, s, live)) {
		t.Fatalf("qgroup 1/%d members %v lack the volume", n, got)
	}
	if err := s.Unmount(); err != nil {
		t.Fatal(err)
	}

	s2 := newPool(t, dir)
	if got := groupOf(t, s2, "keep"); got != n {
		t.Fatalf("group keep is 1/%d after restart, was 1/%d", got, n)
	}
	used, limit, err := s2.GroupUsage(ctx, "keep")
	if err != nil || limit != 10<<20 || used < 2<<20 {
		t.Fatalf("usage after restart: used %d limit %d err %v", used, limit, err)
	}
	// A snapshot after the restart joins the same qgroup; a new group gets
	// a new one.
	snap := storage.Key{Kind: storage.KindSnapshot, Name: "s1"}
	if _, err := s2.Snapshot(ctx, live, snap, storage.SnapshotOptions{ReadOnly: true, Group: "keep"}); err != nil {
		t.Fatal(err)
	}
	if got := members(t, s2, n); !slices.Contains(got, volumeID(t, s2, snap)) {
		t.Fatalf("snapshot after restart not in 1/%d: %v", n, got)
	}
	if err := s2.SetGroupLimit(ctx, "other", 0); err != nil {
		t.Fatal(err)
	}
	if other := groupOf(t, s2, "other"); other == n {
		t.Fatalf("a new group took the id 1/%d of an existing one", n)
	}
}

// TestQuotaGroupIDsUniquePerFilesystem opens two pools on one filesystem
// (two data directories on one btrfs): their groups must not share qgroups.
func TestQuotaGroupIDsUniquePerFilesystem(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t, t.TempDir())
	var stores []*Storage
	for i := range 2 {
		s, err := Open(ctx, Options{DataDir: filepath.Join(pool.poolDir, fmt.Sprintf("d%d", i)), Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, s)
	}
	seen := map[uint64]string{}
	for i, s := range stores {
		for _, g := range []string{"a", "b"} {
			if err := s.SetGroupLimit(ctx, g, 0); err != nil {
				t.Fatal(err)
			}
			n := groupOf(t, s, g)
			if prev, ok := seen[n]; ok {
				t.Fatalf("qgroup 1/%d given to %s and to d%d/%s", n, prev, i, g)
			}
			seen[n] = fmt.Sprintf("d%d/%s", i, g)
		}
	}
}

func TestQuotaGroupTableDamaged(t *testing.T) {
	ctx := context.Background()
	s := newPool(t, t.TempDir())
	if err := s.SetGroupLimit(ctx, "g", 0); err != nil {
		t.Fatal(err)
	}
	table := filepath.Join(s.pool.tableDir(), groupTableFile)
	if _, err := os.Stat(table + ".tmp"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temporary table left behind: %v", err)
	}
	if err := os.WriteFile(table, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.GroupUsage(ctx, "g"); !errors.Is(err, errdefs.ErrConflict) {
		t.Fatalf("damaged table: %v, want ErrConflict", err)
	}
}

// TestQuotaGroupsWithoutSimpleQuotas uses a btrfs data directory whose
// filesystem has no quotas: limits are unsupported, groups are ignored.
func TestQuotaGroupsWithoutSimpleQuotas(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t, t.TempDir()) // for RequireRoot and the binaries
	img := filepath.Join(t.TempDir(), "plain.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, minImageSize); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mkfs.btrfs", "-q", img).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.btrfs: %v: %s", err, out)
	}
	mnt := trackMounts(t.TempDir())
	dev, err := attachLoop(img, pool.pool.log)
	if err != nil {
		t.Fatal(err)
	}
	err = unix.Mount(dev.Name(), mnt, "btrfs", 0, "")
	dev.Close() // autoclear frees the device on unmount
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(mnt, 0); err != nil {
			t.Errorf("unmount %s: %v", mnt, err)
		}
	})

	s, err := Open(ctx, Options{DataDir: filepath.Join(mnt, "data"), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetGroupLimit(ctx, "g", 1<<20); !errors.Is(err, errdefs.ErrUnsupported) {
		t.Errorf("SetGroupLimit without quotas: %v, want ErrUnsupported", err)
	}
	vol := storage.Key{Kind: storage.KindShared, Name: "vol"}
	if _, err := s.Create(ctx, vol); err != nil {
		t.Fatal(err)
	}
	if err := s.SetVolumeLimit(ctx, vol, 1<<20); !errors.Is(err, errdefs.ErrUnsupported) {
		t.Errorf("SetVolumeLimit without quotas: %v, want ErrUnsupported", err)
	}
	if _, _, err := s.GroupUsage(ctx, "g"); !errors.Is(err, errdefs.ErrUnsupported) {
		t.Errorf("GroupUsage without quotas: %v, want ErrUnsupported", err)
	}
	if err := s.DeleteGroup(ctx, "g"); err != nil {
		t.Errorf("DeleteGroup without quotas: %v", err)
	}
	src := storage.Key{Kind: storage.KindSandbox, Name: "src"}
	if _, err := s.Create(ctx, src); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Snapshot(ctx, src, storage.Key{Kind: storage.KindSandbox, Name: "dst"}, storage.SnapshotOptions{Group: "g"}); err != nil {
		t.Errorf("Snapshot into a group without quotas: %v (the group should be ignored)", err)
	}
}

// BenchmarkSnapshotInGroup is BenchmarkSnapshot with every snapshot charged
// to one quota group (the group's lookup, lock and table read included).
// Compare the two with the same -benchtime, e.g. 200x.
func BenchmarkSnapshotInGroup(b *testing.B) {
	ctx := context.Background()
	s := newPool(b, b.TempDir())
	parent := storage.Key{Kind: storage.KindSandbox, Name: "parent"}
	p, err := s.Create(ctx, parent)
	if err != nil {
		b.Fatal(err)
	}
	fillTree(b, p, 200)
	if err := s.SetGroupLimit(ctx, "g", 1<<30); err != nil {
		b.Fatal(err)
	}
	unix.Sync()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k := storage.Key{Kind: storage.KindSnapshot, Name: fmt.Sprintf("s%d", i)}
		if _, err := s.Snapshot(ctx, parent, k, storage.SnapshotOptions{ReadOnly: true, Group: "g"}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGroupLookup measures what a quota group adds to a snapshot:
// lock, table read, qgroup check, pending-drop search.
func BenchmarkGroupLookup(b *testing.B) {
	ctx := context.Background()
	s := newPool(b, b.TempDir())
	if err := s.SetGroupLimit(ctx, "g", 0); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, _, err := s.snapshotGroup("g", true); err != nil {
			b.Fatal(err)
		}
	}
}

// TestReadOnlySnapshotLeavesReclaimAlone: a read-only snapshot into an
// existing group adds nothing the group must make room for, so it does
// not hurry the reclaim of deleted volumes (a commit, which a turn would
// pay with its sandbox frozen); a writable volume made into the group, as
// a rollback makes one, does.
func TestReadOnlySnapshotLeavesReclaimAlone(t *testing.T) {
	ctx := context.Background()
	s, src, _ := poolWithSource(t)
	tab, err := s.openGroupTable()
	if errors.Is(err, errNoSimpleQuotas) {
		if kernelAtLeast(t, 6, 7) {
			t.Fatal("simple quotas are not enabled on a new pool, and this kernel supports them")
		}
		t.Skip("kernel before 6.7: no simple quotas")
	}
	must(t, err)
	tab.close()
	calls := 0
	s.reclaimed = func() { calls++ }
	live := storage.Key{Kind: storage.KindSandbox, Name: "live"}
	_, err = s.Snapshot(ctx, src, live, storage.SnapshotOptions{Group: "g"})
	must(t, err)
	if calls != 0 {
		t.Fatalf("the volume that made group g hurried a reclaim (%d)", calls)
	}
	turn := storage.Key{Kind: storage.KindSnapshot, Name: "turn"}
	_, err = s.Snapshot(ctx, live, turn, storage.SnapshotOptions{Group: "g", ReadOnly: true})
	must(t, err)
	if calls != 0 {
		t.Errorf("a read-only snapshot into group g hurried a reclaim (%d)", calls)
	}
	back := storage.Key{Kind: storage.KindScratch, Name: "rollback-live"}
	_, err = s.Snapshot(ctx, turn, back, storage.SnapshotOptions{Group: "g"})
	must(t, err)
	if calls != 1 {
		t.Errorf("a writable volume made into group g: %d reclaims, want 1", calls)
	}
}

// TestVolumeLimit: a shared volume's cap on its own qgroup stops a write
// past it with EDQUOT, and Stat reports what it holds.
func TestVolumeLimit(t *testing.T) {
	ctx := context.Background()
	s := newPool(t, t.TempDir())
	k := storage.Key{Kind: storage.KindShared, Name: "vol"}
	p, err := s.Create(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetVolumeLimit(ctx, k, 8<<20); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(p, "big"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 1<<20)
	var werr error
	for i := 0; i < 32 && werr == nil; i++ {
		_, werr = f.Write(chunk)
		if werr == nil {
			werr = f.Sync()
		}
	}
	if !errors.Is(werr, unix.EDQUOT) {
		t.Fatalf("32 MiB into an 8 MiB volume: %v, want EDQUOT", werr)
	}
	if info, err := s.Stat(ctx, k); err != nil || info.ExclusiveBytes <= 0 || info.ExclusiveBytes > 9<<20 {
		t.Errorf("Stat after the refused write: %+v, %v", info, err)
	}
	if err := s.SetVolumeLimit(ctx, storage.Key{Kind: storage.KindShared, Name: "nosuch"}, 1<<20); !errdefs.IsNotFound(err) {
		t.Errorf("limit of a missing volume: %v, want ErrNotFound", err)
	}
}
