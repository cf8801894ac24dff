package btrfs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/warrenhq/warren/internal/mountinfo"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/storage"
	"github.com/warrenhq/warren/internal/storage/storagetest"
	"github.com/warrenhq/warren/internal/testutil"
)

const testImageSize = 1 << 30 // sparse: costs only what the tests write

// TestMain fails the run if any btrfs mount made by the tests outlives them.
func TestMain(m *testing.M) {
	before := btrfsMounts()
	code := m.Run()
	for mp := range btrfsMounts() {
		if !before[mp] && ownMount(mp) {
			fmt.Fprintf(os.Stderr, "FAIL: btrfs mount left behind at %s\n", mp)
			code = 1
		}
	}
	os.Exit(code)
}

// mountDirs are the directories under which this test binary mounts pools
// (see trackMounts). Other test binaries, running at the same time (go test
// -p, or a second run of this package), mount pools of their own under
// temporary directories named like ours.
var mountDirs sync.Map

// trackMounts records dir as one this binary mounts pools under.
func trackMounts(dir string) string {
	mountDirs.Store(filepath.Clean(dir), true)
	return dir
}

// ownMount reports whether a mount point is under a directory this binary
// mounts pools under.
func ownMount(mp string) bool {
	own := false
	mountDirs.Range(func(k, _ any) bool {
		rel, err := filepath.Rel(k.(string), mp)
		own = err == nil && !strings.HasPrefix(rel, "..")
		return !own
	})
	return own
}

func btrfsMounts() map[string]bool {
	out := map[string]bool{}
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(data), "\n") {
		if e, ok := mountinfo.ParseLine(line); ok && e.FSType == "btrfs" {
			out[e.MountPoint] = true
		}
	}
	return out
}

// newPool opens a loop-backed pool in a temporary directory and unmounts it
// when the test ends, pass or fail.
func newPool(t testing.TB, dataDir string) *Storage {
	t.Helper()
	testutil.RequireRoot(t)
	testutil.RequireBinary(t, "mkfs.btrfs")
	s, err := Open(context.Background(), Options{DataDir: trackMounts(dataDir), ImageSize: testImageSize, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Unmount(); err != nil {
			t.Errorf("unmount pool: %v", err)
		}
	})
	return s
}

func TestConformance(t *testing.T) {
	// One loop-backed pool; each subtest gets a data directory inside it,
	// which Open sees is on btrfs and uses as it is (the other Open path).
	pool := newPool(t, t.TempDir())
	var n atomic.Int64
	storagetest.Run(t, func(t *testing.T) storage.Storage {
		dataDir := filepath.Join(pool.poolDir, fmt.Sprintf("case%d", n.Add(1)))
		s, err := Open(context.Background(), Options{DataDir: dataDir, Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		if s.poolDir != "" || s.Root() != filepath.Join(dataDir, "volumes") {
			t.Fatalf("data dir on btrfs: got pool %q root %q", s.poolDir, s.Root())
		}
		return s
	})
}

// TestConformanceOwnPool runs the suite on the loop-backed pool itself.
func TestConformanceOwnPool(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Storage {
		return newPool(t, t.TempDir())
	})
}

func TestReopenAfterUnmount(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := newPool(t, dir)
	p, err := s.Create(ctx, storage.Key{Kind: storage.KindTemplate, Name: "kept"})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p, "file"), []byte("still here"), 0o644); err != nil {
		t.Fatal(err)
	}
	uuid := poolUUID(t, s)
	if err := s.Unmount(); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := mountinfo.At(s.poolDir); ok {
		t.Fatal("pool still mounted after Unmount")
	}
	if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("volume visible after Unmount: %v", err)
	}

	s2 := newPool(t, dir)
	if got := poolUUID(t, s2); got != uuid {
		t.Fatalf("pool was reformatted: uuid %s, was %s", got, uuid)
	}
	b, err := os.ReadFile(filepath.Join(s2.Path(storage.Key{Kind: storage.KindTemplate, Name: "kept"}), "file"))
	if err != nil || string(b) != "still here" {
		t.Fatalf("data after re-open: %q, %v", b, err)
	}
}

func TestReopenWhileMounted(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := newPool(t, dir)
	k := storage.Key{Kind: storage.KindSandbox, Name: "running"}
	if _, err := s.Create(ctx, k); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(ctx, Options{DataDir: dir, ImageSize: testImageSize, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Stat(ctx, k); err != nil {
		t.Fatalf("volume through the second Open: %v", err)
	}
	if n := countMounts(t, s.poolDir); n != 1 {
		t.Fatalf("%d mounts at %s, want 1 (the pool must be reused, not mounted again)", n, s.poolDir)
	}
}

func TestSimpleQuotas(t *testing.T) {
	ctx := context.Background()
	s := newPool(t, t.TempDir())
	f, err := os.Open(s.poolDir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !quotasEnabled(int(f.Fd())) {
		if kernelAtLeast(t, 6, 7) {
			t.Fatal("simple quotas are not enabled on a new pool, and this kernel supports them")
		}
		t.Skip("kernel before 6.7: no simple quotas")
	}
	k := storage.Key{Kind: storage.KindSandbox, Name: "q"}
	p, err := s.Create(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p, "blob"), make([]byte, 4<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	unix.Sync() // simple quotas account extents when they are written out
	info, err := s.Stat(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("exclusive %d, referenced %d", info.ExclusiveBytes, info.ReferencedBytes)
	if info.ExclusiveBytes < 4<<20 || info.ReferencedBytes < 4<<20 {
		t.Errorf("sizes after writing 4 MiB: %+v", info)
	}
}

func TestDeleteNestedSubvolumes(t *testing.T) {
	ctx := context.Background()
	s := newPool(t, t.TempDir())
	k := storage.Key{Kind: storage.KindSandbox, Name: "nest"}
	p, err := s.Create(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	// What code inside a sandbox could do: subvolumes in subvolumes, one of
	// them read-only, then the sandbox snapshotted read-only.
	must(t, os.MkdirAll(filepath.Join(p, "var", "lib"), 0o755))
	mkSubvol(t, filepath.Join(p, "var", "lib"), "inner")
	mkSubvol(t, filepath.Join(p, "var", "lib", "inner"), "deeper")
	must(t, os.WriteFile(filepath.Join(p, "var", "lib", "inner", "deeper", "f"), []byte("x"), 0o400))
	must(t, s.setRO(filepath.Join(p, "var", "lib", "inner", "deeper")))
	must(t, s.SetReadOnly(ctx, k, true))

	if err := s.Delete(ctx, k); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("volume still there: %v", err)
	}
}

func TestPlainDirectoryIsNotAVolume(t *testing.T) {
	ctx := context.Background()
	s := newPool(t, t.TempDir())
	k := storage.Key{Kind: storage.KindSandbox, Name: "stray"}
	must(t, os.Mkdir(s.Path(k), 0o755))
	if err := s.Delete(ctx, k); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("Delete of a plain directory: %v, want ErrConflict", err)
	}
	if _, err := s.Snapshot(ctx, k, storage.Key{Kind: storage.KindSnapshot, Name: "x"}, storage.SnapshotOptions{}); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("Snapshot of a plain directory: %v, want ErrConflict", err)
	}
}

func TestOpenValidates(t *testing.T) {
	ctx := context.Background()
	if _, err := Open(ctx, Options{}); !errors.Is(err, errdefs.ErrInvalid) {
		t.Errorf("no data dir: %v, want ErrInvalid", err)
	}
	if _, err := Open(ctx, Options{DataDir: t.TempDir(), ImageSize: 10 << 20}); !errors.Is(err, errdefs.ErrInvalid) {
		t.Errorf("10 MiB image: %v, want ErrInvalid", err)
	}
}

func TestIsBtrfs(t *testing.T) {
	dir := t.TempDir()
	s := newPool(t, dir)
	for p, want := range map[string]bool{dir: false, s.poolDir: true, s.Root(): true} {
		got, err := IsBtrfs(p)
		if err != nil || got != want {
			t.Errorf("IsBtrfs(%s) = %t, %v; want %t", p, got, err, want)
		}
	}
	if _, err := IsBtrfs(filepath.Join(dir, "missing")); err == nil {
		t.Error("IsBtrfs of a missing path: no error")
	}
}

// BenchmarkSnapshot measures a read-only snapshot of a small tree. Run with
// a fixed count, e.g. -bench Snapshot -benchtime 200x: each snapshot kept
// makes the next a little slower.
func BenchmarkSnapshot(b *testing.B) {
	ctx := context.Background()
	s := newPool(b, b.TempDir())
	parent := storage.Key{Kind: storage.KindSandbox, Name: "parent"}
	p, err := s.Create(ctx, parent)
	if err != nil {
		b.Fatal(err)
	}
	fillTree(b, p, 200)
	unix.Sync()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k := storage.Key{Kind: storage.KindSnapshot, Name: fmt.Sprintf("s%d", i)}
		if _, err := s.Snapshot(ctx, parent, k, storage.SnapshotOptions{ReadOnly: true}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDelete measures issuing the delete of a read-only snapshot (the
// kernel reclaims its space later, in the background). Snapshots are made
// untimed in batches, written out, then deleted timed. Run with a fixed
// count, e.g. -bench Delete -benchtime 500x: making the snapshots costs far
// more than deleting them.
func BenchmarkDelete(b *testing.B) {
	ctx := context.Background()
	s := newPool(b, b.TempDir())
	parent := storage.Key{Kind: storage.KindSandbox, Name: "parent"}
	p, err := s.Create(ctx, parent)
	if err != nil {
		b.Fatal(err)
	}
	fillTree(b, p, 200)
	b.ResetTimer()
	for done := 0; done < b.N; {
		batch := min(b.N-done, 100)
		b.StopTimer()
		keys := make([]storage.Key, batch)
		for i := range keys {
			keys[i] = storage.Key{Kind: storage.KindSnapshot, Name: fmt.Sprintf("s%d", done+i)}
			if _, err := s.Snapshot(ctx, parent, keys[i], storage.SnapshotOptions{ReadOnly: true}); err != nil {
				b.Fatal(err)
			}
		}
		unix.Sync()
		b.StartTimer()
		for _, k := range keys {
			if err := s.Delete(ctx, k); err != nil {
				b.Fatal(err)
			}
		}
		done += batch
	}
}

// testLogger shows the backend's logs only for a failed test (or with -v).
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), nil))
}

func fillTree(tb testing.TB, root string, n int) {
	tb.Helper()
	for i := range n {
		d := filepath.Join(root, fmt.Sprintf("d%d", i%10))
		if err := os.MkdirAll(d, 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%d", i)), make([]byte, 4096), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func mkSubvol(t *testing.T, dir, name string) {
	t.Helper()
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := subvolCreate(int(f.Fd()), name); err != nil {
		t.Fatalf("create subvolume %s/%s: %v", dir, name, err)
	}
}

func (s *Storage) setRO(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	return setReadOnly(int(f.Fd()), true)
}

func poolUUID(t *testing.T, s *Storage) string {
	t.Helper()
	f, err := os.Open(s.Root())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u, err := fsUUID(int(f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func countMounts(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(data), "\n") {
		if e, ok := mountinfo.ParseLine(line); ok && e.MountPoint == path {
			n++
		}
	}
	return n
}

func kernelAtLeast(t *testing.T, major, minor int) bool {
	t.Helper()
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	var ma, mi int
	fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &ma, &mi)
	return ma > major || (ma == major && mi >= minor)
}

func TestLoopDeviceFlags(t *testing.T) {
	s := newPool(t, t.TempDir())
	m, ok, err := mountinfo.At(s.poolDir)
	if err != nil || !ok {
		t.Fatalf("pool not mounted: %v", err)
	}
	f, err := os.Open(m.Source)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	info, err := unix.IoctlLoopGetStatus64(int(f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	if info.Flags&unix.LO_FLAGS_AUTOCLEAR == 0 {
		t.Error("loop device lacks autoclear: it would outlive the unmount")
	}
	// /tmp takes direct I/O here; on tmpfs the loop falls back to buffered.
	t.Logf("loop %s flags %#x (direct I/O: %t)", m.Source, info.Flags, info.Flags&unix.LO_FLAGS_DIRECT_IO != 0)
}

// TestNewPoolSingleMetadata checks that a new pool has 4 KiB tree nodes and
// that its metadata is single and keeps the room DUP's first chunk had (a pool that data fills must still
// be able to delete), read from the kernel's own accounting in sysfs.
func TestNewPoolSingleMetadata(t *testing.T) {
	s := newPool(t, t.TempDir())
	f, err := os.Open(s.poolDir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	uuid, err := fsUUID(int(f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := readInt(filepath.Join("/sys/fs/btrfs", uuid, "nodesize")); err != nil || n != poolNodeSize {
		t.Errorf("nodesize = %d, %v; want %d", n, err, poolNodeSize)
	}
	alloc := filepath.Join("/sys/fs/btrfs", uuid, "allocation")
	for _, kind := range []string{"metadata", "system"} {
		if _, err := os.Stat(filepath.Join(alloc, kind, "dup")); err == nil {
			t.Errorf("%s still has a DUP profile", kind)
		}
		total, err := readInt(filepath.Join(alloc, kind, "single", "total_bytes"))
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		t.Logf("%s single: %d MiB", kind, total>>20)
		if kind == "metadata" && total < 64<<20 {
			t.Errorf("metadata has %d MiB allocated; want the kernel's first chunk (about 10 %% of the pool), not mkfs -m single's 8 MiB", total>>20)
		}
	}
}
