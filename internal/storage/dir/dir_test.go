package dir

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/storage"
	"github.com/warrenhq/warren/internal/storage/storagetest"
)

func newStorage(t *testing.T) *Storage {
	t.Helper()
	s, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Storage { return newStorage(t) })
}

func TestNewCleansLeftovers(t *testing.T) {
	root := t.TempDir()
	s, err := New(root)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	kept := storage.Key{Kind: storage.KindSnapshot, Name: "kept"}
	if _, err := s.Create(ctx, kept); err != nil {
		t.Fatal(err)
	}
	if err := s.SetReadOnly(ctx, kept, true); err != nil {
		t.Fatal(err)
	}
	kindDir := filepath.Join(root, string(storage.KindSnapshot))
	// What a crash can leave: a half copy, a half delete, a lone marker.
	leftovers := []string{tmpPrefix + "half-abc", trashPrefix + "gone-abc"}
	for _, n := range leftovers {
		must(t, os.MkdirAll(filepath.Join(kindDir, n, "sub"), 0o755))
	}
	must(t, os.WriteFile(filepath.Join(kindDir, ".lonely.ro"), nil, 0o600))

	s2, err := New(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range append(leftovers, ".lonely.ro") {
		if _, err := os.Lstat(filepath.Join(kindDir, n)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("leftover %s survived New: %v", n, err)
		}
	}
	info, err := s2.Stat(ctx, kept)
	if err != nil || !info.ReadOnly {
		t.Errorf("a real volume's marker after New: %+v, %v", info, err)
	}
}

func TestCancelledSnapshotLeavesNothing(t *testing.T) {
	s := newStorage(t)
	ctx := context.Background()
	src := storage.Key{Kind: storage.KindSandbox, Name: "src"}
	p, err := s.Create(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	must(t, os.MkdirAll(filepath.Join(p, "a", "b"), 0o755))
	must(t, os.WriteFile(filepath.Join(p, "a", "b", "f"), []byte("x"), 0o644))
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	dst := storage.Key{Kind: storage.KindSnapshot, Name: "dst"}
	if _, err := s.Snapshot(cctx, src, dst, storage.SnapshotOptions{ReadOnly: true}); !errors.Is(err, context.Canceled) {
		t.Fatalf("snapshot with a cancelled context: %v", err)
	}
	entries, err := os.ReadDir(filepath.Join(s.root, string(storage.KindSnapshot)))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("a cancelled snapshot left %d entries, first %s", len(entries), entries[0].Name())
	}
}

func TestSnapshotCopiesLinksNodesXattrs(t *testing.T) {
	s := newStorage(t)
	ctx := context.Background()
	src := storage.Key{Kind: storage.KindSandbox, Name: "src"}
	p, err := s.Create(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	must(t, os.WriteFile(filepath.Join(p, "a"), []byte("shared"), 0o644))
	must(t, os.Link(filepath.Join(p, "a"), filepath.Join(p, "b")))
	must(t, unix.Mkfifo(filepath.Join(p, "fifo"), 0o620))
	must(t, os.Chmod(filepath.Join(p, "fifo"), 0o620)) // umask trimmed it
	xattrOK := unix.Lsetxattr(filepath.Join(p, "a"), "user.warren", []byte("v"), 0) == nil
	root := os.Geteuid() == 0
	if root {
		must(t, unix.Mknod(filepath.Join(p, "null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))))
	}

	c, err := s.Snapshot(ctx, src, storage.Key{Kind: storage.KindSnapshot, Name: "c"}, storage.SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var sa, sb unix.Stat_t
	must(t, unix.Lstat(filepath.Join(c, "a"), &sa))
	must(t, unix.Lstat(filepath.Join(c, "b"), &sb))
	if sa.Ino != sb.Ino {
		t.Error("hard links became separate files")
	}
	var sf unix.Stat_t
	must(t, unix.Lstat(filepath.Join(c, "fifo"), &sf))
	if sf.Mode&unix.S_IFMT != unix.S_IFIFO || sf.Mode&0o7777 != 0o620 {
		t.Errorf("fifo copied as mode %#o", sf.Mode)
	}
	if root {
		var sn unix.Stat_t
		must(t, unix.Lstat(filepath.Join(c, "null"), &sn))
		if sn.Mode&unix.S_IFMT != unix.S_IFCHR || sn.Rdev != unix.Mkdev(1, 3) {
			t.Errorf("device node copied as mode %#o rdev %d", sn.Mode, sn.Rdev)
		}
	}
	if xattrOK {
		buf := make([]byte, 8)
		n, err := unix.Lgetxattr(filepath.Join(c, "a"), "user.warren", buf)
		if err != nil || string(buf[:n]) != "v" {
			t.Errorf("xattr in the copy: %q, %v", buf[:n], err)
		}
	}
	// The copy's data is its own.
	must(t, os.WriteFile(filepath.Join(c, "a"), []byte("changed"), 0o644))
	if b, _ := os.ReadFile(filepath.Join(p, "b")); string(b) != "shared" {
		t.Errorf("writing the copy changed the source: %q", b)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
