package treemerge

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/storage/treediff"
)

// build writes files (content "->x" makes a symlink to x) under a new
// directory. Every path has one mtime, but those whose content differs from
// base's, so that a diff sees what changed as an agent's writes would show.
func build(t *testing.T, files, base map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, c := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		if len(c) > 2 && c[:2] == "->" {
			err = os.Symlink(c[2:], full)
		} else {
			err = os.WriteFile(full, []byte(c), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	var paths []string
	filepath.Walk(root, func(p string, _ os.FileInfo, _ error) error { paths = append(paths, p); return nil })
	for i := len(paths) - 1; i >= 0; i-- {
		stamp := unix.NsecToTimespec(1e18)
		if r, _ := filepath.Rel(root, paths[i]); base != nil && files[r] != "" && files[r] != base[r] {
			stamp = unix.NsecToTimespec(2e18)
		}
		ts := []unix.Timespec{stamp, stamp}
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, paths[i], ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func merge(t *testing.T, base, ours, theirs map[string]string, s Strategy) (map[string]Entry, string) {
	t.Helper()
	b, o, th := build(t, base, nil), build(t, ours, base), build(t, theirs, base)
	ctx := context.Background()
	oc, err := treediff.Walk(ctx, b, o, treediff.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tc, err := treediff.Walk(ctx, b, th, treediff.Options{})
	if err != nil {
		t.Fatal(err)
	}
	entries, err := Merge(ctx, Request{Base: b, Ours: o, Theirs: th, OursChanges: oc, TheirsChanges: tc, Strategy: s})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]Entry{}
	for _, e := range entries {
		out[e.Path] = e
	}
	return out, o
}

func read(t *testing.T, root, p string) string {
	t.Helper()
	if fi, err := os.Lstat(filepath.Join(root, p)); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		l, _ := os.Readlink(filepath.Join(root, p))
		return "->" + l
	}
	b, err := os.ReadFile(filepath.Join(root, p))
	if os.IsNotExist(err) {
		return "<none>"
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestMerge(t *testing.T) {
	base := map[string]string{"f": "1\n2\n3\n4\n5\n", "same": "s\n", "del": "d\n", "bin": "\x00a", "dir/x": "x\n", "l": "->a"}
	ours := map[string]string{"f": "1\nO\n3\n4\n5\n", "same": "s\n", "del": "d2\n", "bin": "\x00o", "dir/x": "x\n", "l": "->a"}
	theirs := map[string]string{"f": "1\n2\n3\n4\nT\n", "same": "s\n", "bin": "\x00t", "dir/x": "x\n", "dir/new": "n\n",
		"l": "->/etc/passwd", "t-only": "t\n"}
	got, o := merge(t, base, ours, theirs, ThreeWay)
	want := map[string]Outcome{"/f": Merged, "/del": Conflict, "/bin": Conflict, "/dir/new": Taken, "/l": Taken, "/t-only": Taken}
	for p, w := range want {
		if got[p].Outcome != w {
			t.Errorf("%s: %+v, want %s", p, got[p], w)
		}
	}
	for p, w := range map[string]string{"f": "1\nO\n3\n4\nT\n", "del": "d2\n", "bin": "\x00o", "dir/new": "n\n",
		"l": "->/etc/passwd", "t-only": "t\n"} {
		if r := read(t, o, p); r != w {
			t.Errorf("%s holds %q, want %q", p, r, w)
		}
	}
	_, o = merge(t, base, ours, theirs, Theirs)
	if r := read(t, o, "del"); r != "<none>" {
		t.Errorf("theirs: del holds %q", r)
	}
	if r := read(t, o, "bin"); r != "\x00t" {
		t.Errorf("theirs: bin holds %q", r)
	}
}

func TestCherryPickAndPaths(t *testing.T) {
	if _, err := CheckPaths([]string{"a/../../etc"}); err == nil {
		t.Error("a path with .. was accepted")
	}
	o, th := build(t, map[string]string{"a/x": "o", "a/extra": "e", "b": "o"}, nil), build(t, map[string]string{"a/x": "t", "a/y": "y", "b": "t"}, nil)
	entries, err := CherryPick(context.Background(), o, th, []string{"/a"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 3 {
		t.Errorf("entries %+v", entries)
	}
	for p, w := range map[string]string{"a/x": "t", "a/y": "y", "a/extra": "<none>", "b": "o"} {
		if r := read(t, o, p); r != w {
			t.Errorf("%s holds %q, want %q", p, r, w)
		}
	}
}

func TestMergeRenames(t *testing.T) {
	base := map[string]string{"r": "1\n2\n3\n", "s": "a\nb\nc\n"}
	ours := map[string]string{"r2": "1\n2\n3\n", "s": "a\nours\nc\n"}
	theirs := map[string]string{"r": "1\n2 edited\n3\n", "s2": "a\nb\nc\n"}
	got, o := merge(t, base, ours, theirs, ThreeWay)
	for p, w := range map[string]string{"r2": "1\n2 edited\n3\n", "r": "<none>", "s2": "a\nours\nc\n", "s": "<none>"} {
		if r := read(t, o, p); r != w {
			t.Errorf("%s holds %q, want %q (%+v)", p, r, w, got)
		}
	}
	if got["/r2"].Outcome != Merged || got["/s2"].Outcome != Merged {
		t.Errorf("entries %+v", got)
	}
}

func TestSameFileLarge(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", 40000) // 640 KB: several chunks
	changed := big[:len(big)-1] + "X"
	a := build(t, map[string]string{"f": big, "g": big}, nil)
	b := build(t, map[string]string{"f": big, "g": changed}, nil)
	ta, _ := openTree(a)
	tb, _ := openTree(b)
	defer ta.Close()
	defer tb.Close()
	if same, err := sameFile(ta, tb, "/f"); !same || err != nil {
		t.Errorf("equal files: %v %v", same, err)
	}
	if same, err := sameFile(ta, tb, "/g"); same || err != nil {
		t.Errorf("files differing in their last byte: %v %v", same, err)
	}
}

func TestMergeIntoRemovedDir(t *testing.T) {
	base := map[string]string{"d/a": "a\n"}
	theirs := map[string]string{"d/a": "a\n", "d/new": "n\n"}
	got, o := merge(t, base, map[string]string{"other": "o\n"}, theirs, ThreeWay)
	if got["/d/new"].Outcome != Conflict {
		t.Errorf("entries %+v", got)
	}
	if r := read(t, o, "d/new"); r != "<none>" {
		t.Errorf("d/new holds %q", r)
	}
}
