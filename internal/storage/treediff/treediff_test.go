package treediff

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/storage"
)

func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, p, content string) {
	t.Helper()
	mustDo(t, os.MkdirAll(filepath.Dir(p), 0o755))
	mustDo(t, os.WriteFile(p, []byte(content), 0o644))
}

// stamp gives p a fixed mtime so that copies made at different moments
// compare equal without SameInodes.
var stampTime = time.Date(2024, 1, 2, 3, 4, 5, 6, time.UTC)

func stampTree(t *testing.T, root string) {
	t.Helper()
	// Deepest first: setting a child's time does not touch the parent's,
	// but creating entries does, so stamp after building.
	var paths []string
	mustDo(t, filepath.Walk(root, func(p string, _ os.FileInfo, err error) error {
		paths = append(paths, p)
		return err
	}))
	for i := len(paths) - 1; i >= 0; i-- {
		ts := unix.NsecToTimespec(stampTime.UnixNano())
		mustDo(t, unix.UtimesNanoAt(unix.AT_FDCWD, paths[i], []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW))
	}
}

func buildBase(t *testing.T, root string) {
	t.Helper()
	write(t, filepath.Join(root, "keep.txt"), "keep")
	write(t, filepath.Join(root, "mod.txt"), "old")
	write(t, filepath.Join(root, "chmod.txt"), "x")
	write(t, filepath.Join(root, "gone", "a", "b.txt"), "b")
	write(t, filepath.Join(root, "gone", "c.txt"), "c")
	write(t, filepath.Join(root, "typechange"), "file")
	write(t, filepath.Join(root, "sub", "deep.txt"), "deep")
	mustDo(t, os.Symlink("keep.txt", filepath.Join(root, "link")))
}

func kinds(changes []storage.Change) []string {
	var out []string
	for _, c := range changes {
		out = append(out, string(c.Kind)+" "+c.Type+" "+c.Path)
	}
	return out
}

func TestWalkIdenticalTreesIsEmpty(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	buildBase(t, a)
	buildBase(t, b)
	stampTree(t, a)
	stampTree(t, b)
	got, err := Walk(context.Background(), a, b, Options{})
	mustDo(t, err)
	if len(got) != 0 {
		t.Fatalf("identical trees differ: %v", kinds(got))
	}
}

func TestWalkChanges(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	buildBase(t, a)
	buildBase(t, b)
	stampTree(t, a)
	stampTree(t, b)

	write(t, filepath.Join(b, "mod.txt"), "newer")
	write(t, filepath.Join(b, "new", "n.txt"), "n")
	mustDo(t, os.Chmod(filepath.Join(b, "chmod.txt"), 0o600))
	mustDo(t, os.RemoveAll(filepath.Join(b, "gone")))
	mustDo(t, os.Remove(filepath.Join(b, "typechange")))
	write(t, filepath.Join(b, "typechange", "inside"), "i")
	mustDo(t, os.Remove(filepath.Join(b, "link")))
	mustDo(t, os.Symlink("mod.txt", filepath.Join(b, "link")))
	// Fix every time but the ones the edits above should show, so that
	// only real changes remain: the parents of changed entries keep
	// their new mtimes.
	for _, p := range []string{"keep.txt", "sub", "sub/deep.txt"} {
		mustDo(t, os.Chtimes(filepath.Join(b, p), stampTime, stampTime))
	}

	got, err := Walk(context.Background(), a, b, Options{})
	mustDo(t, err)
	want := []string{
		"modified dir /",
		"modified file /chmod.txt",
		"removed dir /gone",
		"removed dir /gone/a",
		"removed file /gone/a/b.txt",
		"removed file /gone/c.txt",
		"modified symlink /link",
		"modified file /mod.txt",
		"added dir /new",
		"added file /new/n.txt",
		"removed file /typechange",
		"added dir /typechange",
		"added file /typechange/inside",
	}
	if !reflect.DeepEqual(kinds(got), want) {
		t.Fatalf("got\n%v\nwant\n%v", kinds(got), want)
	}
	for _, c := range got {
		switch c.Path {
		case "/chmod.txt":
			if c.Mode != 0o600 || c.OldMode != 0o644 || c.Size != 1 || c.OldSize != 1 {
				t.Errorf("chmod change: %+v", c)
			}
		case "/mod.txt":
			if c.Size != 5 || c.OldSize != 3 {
				t.Errorf("modify change: %+v", c)
			}
		case "/gone/c.txt":
			if c.Size != 0 || c.Mode != 0 || c.OldSize != 1 || c.OldMode != 0o644 {
				t.Errorf("removed change: %+v", c)
			}
		case "/new":
			if c.Size != 0 || c.OldMode != 0 || c.Mode != 0o755 {
				t.Errorf("added dir: %+v", c)
			}
		}
	}
}

// TestWalkSameInodes: a file replaced by a copy with the same size and
// mtime is invisible to the copy rule and caught by the inode rule.
func TestWalkSameInodes(t *testing.T) {
	a := t.TempDir()
	write(t, filepath.Join(a, "f"), "same")
	b := t.TempDir()
	// b's file is a hard link to a's: one inode, as in two snapshots.
	mustDo(t, os.Link(filepath.Join(a, "f"), filepath.Join(b, "f")))
	mustDo(t, os.Chtimes(b, stampTime, stampTime))
	mustDo(t, os.Chtimes(a, stampTime, stampTime))
	mustDo(t, os.Chmod(b, 0o700))
	mustDo(t, os.Chmod(a, 0o700))

	got, err := Walk(context.Background(), a, b, Options{SameInodes: true})
	mustDo(t, err)
	// The roots are different directories (other inodes): only "/" differs.
	if want := []string{"modified dir /"}; !reflect.DeepEqual(kinds(got), want) {
		t.Fatalf("got %v, want %v", kinds(got), want)
	}

	fi, err := os.Stat(filepath.Join(b, "f"))
	mustDo(t, err)
	mustDo(t, os.Remove(filepath.Join(b, "f")))
	write(t, filepath.Join(b, "f"), "same")
	mustDo(t, os.Chtimes(filepath.Join(b, "f"), fi.ModTime(), fi.ModTime()))
	mustDo(t, os.Chtimes(b, stampTime, stampTime))

	got, err = Walk(context.Background(), a, b, Options{})
	mustDo(t, err)
	if len(got) != 0 {
		t.Fatalf("copy rule: got %v, want no change (same size, mtime, mode, owner)", kinds(got))
	}
	got, err = Walk(context.Background(), a, b, Options{SameInodes: true})
	mustDo(t, err)
	if want := []string{"modified dir /", "modified file /f"}; !reflect.DeepEqual(kinds(got), want) {
		t.Fatalf("inode rule: got %v, want %v", kinds(got), want)
	}
}

// TestWalkDoesNotFollowSymlinks: a symlinked directory is an entry, never
// entered, and lookups through it see nothing.
func TestWalkDoesNotFollowSymlinks(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	outside := t.TempDir()
	write(t, filepath.Join(outside, "secret"), "s")
	mustDo(t, os.Symlink(outside, filepath.Join(b, "escape")))
	mustDo(t, os.Mkdir(filepath.Join(a, "escape"), 0o755))
	write(t, filepath.Join(a, "escape", "secret"), "s")

	got, err := Walk(context.Background(), a, b, Options{})
	mustDo(t, err)
	for _, c := range got {
		if c.Path == "/escape/secret" && c.Kind != storage.ChangeRemoved {
			t.Fatalf("walk went through a symlink: %+v", c)
		}
	}

	c, err := NewComparer(a, b, Options{SameInodes: true})
	mustDo(t, err)
	defer c.Close()
	mustDo(t, c.Path(context.Background(), "/escape/secret"))
	// Present in a, absent (behind a symlink) in b: removed, not modified.
	if ch := c.Changes(); len(ch) != 1 || ch[0].Kind != storage.ChangeRemoved {
		t.Fatalf("lookup through a symlink: %v", kinds(ch))
	}
}

func TestComparerChildrenNeedsSameInodes(t *testing.T) {
	c, err := NewComparer(t.TempDir(), t.TempDir(), Options{})
	mustDo(t, err)
	defer c.Close()
	if err := c.Children(context.Background(), "/"); !errors.Is(err, errdefs.ErrInvalid) {
		t.Fatalf("got %v, want ErrInvalid", err)
	}
}

func TestWalkMissingRoot(t *testing.T) {
	_, err := Walk(context.Background(), filepath.Join(t.TempDir(), "nope"), t.TempDir(), Options{})
	if !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("got %v, want ErrNotFound", err)
	}
}

func TestWalkCancelled(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	buildBase(t, a)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Walk(ctx, a, b, Options{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}
