package tools

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/agent/internal/agenttest"
)

func TestRead(t *testing.T) {
	e := newEnv(t)
	writeFile(t, e.home, "a.txt", "one\ntwo\r\nthree\nfour\nfive")
	if got := mustOK(t, e.run(t, "read", map[string]any{"path": "a.txt"})); got != "     1\tone\n     2\ttwo\n     3\tthree\n     4\tfour\n     5\tfive" {
		t.Fatalf("whole file: %q", got)
	}
	got := mustOK(t, e.run(t, "read", map[string]any{"path": "~/a.txt", "offset": 2, "limit": 2}))
	if got != "     2\ttwo\n     3\tthree\n[showing lines 2-3 of 5; continue with offset=4]" {
		t.Fatalf("window: %q", got)
	}
	mustFail(t, e.run(t, "read", map[string]any{"path": "a.txt", "offset": 9}), "offset 9 is past the end", "which has 5 lines")
	mustFail(t, e.run(t, "read", map[string]any{"path": "missing.txt"}), "no such file or directory", e.home+"/missing.txt")
	mustFail(t, e.run(t, "read", map[string]any{"path": "."}), "is a directory", "ls")

	writeFile(t, e.home, "empty", "")
	contains(t, mustOK(t, e.run(t, "read", map[string]any{"path": "empty"})), "is empty")

	png := "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + strings.Repeat("\x00\x01", 100)
	writeFile(t, e.home, "img.png", png)
	mustFail(t, e.run(t, "read", map[string]any{"path": "img.png"}), "is a binary file", "image/png", "xxd")

	long := strings.Repeat("é", 3000) // 6000 bytes
	writeFile(t, e.home, "long.txt", long+"\nshort\n")
	got = mustOK(t, e.run(t, "read", map[string]any{"path": "long.txt"}))
	contains(t, got, "… [line cut: 4000 more bytes]", "     2\tshort")
	if !strings.HasPrefix(got, "     1\t"+strings.Repeat("é", 1000)+"…") {
		t.Fatalf("long line not cut at a character boundary: %q", got[:40])
	}
}

func TestReadLargeFileWithOffset(t *testing.T) {
	e := newEnv(t)
	// A 50 MB file of a million numbered lines.
	p := filepath.Join(e.home, "big.log")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	for i := 1; i <= 1_000_000; i++ {
		fmt.Fprintf(w, "line %07d %s\n", i, strings.Repeat("x", 36))
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if fi, _ := os.Stat(p); fi.Size() != 50_000_000 {
		t.Fatalf("fixture size %d", fi.Size())
	}
	got := mustOK(t, e.run(t, "read", map[string]any{"path": p, "offset": 999_998, "limit": 2}))
	want := fmt.Sprintf("999998\tline 0999998 %s\n999999\tline 0999999 %s\n[showing lines 999998-999999 of 1000000; continue with offset=1000000]",
		strings.Repeat("x", 36), strings.Repeat("x", 36))
	if got != want {
		t.Fatalf("got %q", got)
	}
	got = mustOK(t, e.run(t, "read", map[string]any{"path": p}))
	contains(t, got, "     1\tline 0000001", "[showing lines 1-2000 of 1000000; continue with offset=2001]")
}

func TestWrite(t *testing.T) {
	e := newEnv(t)
	got := mustOK(t, e.run(t, "write", map[string]any{"path": "deep/er/new.txt", "content": "a\nb"}))
	contains(t, got, "Wrote 3 bytes (2 lines) to "+e.home+"/deep/er/new.txt (created, with 2 new parent directories)")
	if readFile(t, filepath.Join(e.home, "deep/er/new.txt")) != "a\nb" {
		t.Fatal("content")
	}

	// Replacing keeps the mode; a symlink is written through.
	script := writeFile(t, e.home, "run.sh", "old")
	if err := os.Chmod(script, 0o751); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("run.sh", filepath.Join(e.home, "link")); err != nil {
		t.Fatal(err)
	}
	contains(t, mustOK(t, e.run(t, "write", map[string]any{"path": "link", "content": ""})), "(replaced)")
	fi, err := os.Lstat(script)
	if err != nil || fi.Mode().Perm() != 0o751 || fi.Size() != 0 {
		t.Fatalf("replaced file: %v %v", fi.Mode(), err)
	}
	if li, _ := os.Lstat(filepath.Join(e.home, "link")); li.Mode()&fs.ModeSymlink == 0 {
		t.Fatal("the symlink was replaced by a file")
	}
	mustFail(t, e.run(t, "write", map[string]any{"path": "deep", "content": "x"}), "is a directory")
	leftovers, _ := filepath.Glob(filepath.Join(e.home, tempPrefix+"*"))
	if len(leftovers) > 0 {
		t.Fatalf("temporary files left: %v", leftovers)
	}
}

func TestWriteOwnership(t *testing.T) {
	agenttest.RequireRoot(t)
	e := newEnvAs(t, 4321, 4322)
	mustOK(t, e.run(t, "write", map[string]any{"path": "d/new.txt", "content": "x"}))
	for _, p := range []string{"d", "d/new.txt"} {
		fi, err := os.Stat(filepath.Join(e.home, p))
		if err != nil {
			t.Fatal(err)
		}
		if uid, gid := ownerOf(fi); uid != 4321 || gid != 4322 {
			t.Fatalf("%s owned by %d:%d, want the user's 4321:4322", p, uid, gid)
		}
	}
	// A file someone else owns keeps its owner when the user rewrites it.
	other := writeFile(t, e.home, "root-owned", "x")
	if err := os.Chown(other, 0, 0); err != nil {
		t.Fatal(err)
	}
	mustOK(t, e.run(t, "write", map[string]any{"path": "root-owned", "content": "y"}))
	mustOK(t, e.run(t, "edit", map[string]any{"path": "root-owned", "oldString": "y", "newString": "z"}))
	fi, _ := os.Stat(other)
	if uid, gid := ownerOf(fi); uid != 0 || gid != 0 || readFile(t, other) != "z" {
		t.Fatalf("owner %d:%d content %q", uid, gid, readFile(t, other))
	}
}

func TestEdit(t *testing.T) {
	e := newEnv(t)
	p := writeFile(t, e.home, "main.go", "package main\n\nfunc a() {}\n\nfunc b() {}\n\nfunc a() {}\n")
	if err := os.Chmod(p, 0o700); err != nil {
		t.Fatal(err)
	}

	got := mustOK(t, e.run(t, "edit", map[string]any{"path": "main.go", "oldString": "func b() {}", "newString": "func b() {\n\treturn\n}"}))
	contains(t, got, "replaced 1 occurrence", "     5\tfunc b() {\n     6\t\treturn\n     7\t}")
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o700 {
		t.Fatalf("mode %v not kept", fi.Mode())
	}

	mustFail(t, e.run(t, "edit", map[string]any{"path": "main.go", "oldString": "func a() {}", "newString": "x"}),
		"occurs 2 times", "at lines 3, 9", "replaceAll")
	mustFail(t, e.run(t, "edit", map[string]any{"path": "main.go", "oldString": "  func b() {\n    return", "newString": "x"}),
		"was not found", "first line occurs (ignoring surrounding whitespace) at line 5")
	mustFail(t, e.run(t, "edit", map[string]any{"path": "main.go", "oldString": "func zzz", "newString": "x"}),
		"was not found", "Not even its first line")
	mustFail(t, e.run(t, "edit", map[string]any{"path": "main.go", "oldString": "x", "newString": "x"}), "the same")
	mustFail(t, e.run(t, "edit", map[string]any{"path": "nope.go", "oldString": "x", "newString": "y"}), "does not exist", "write")

	contains(t, mustOK(t, e.run(t, "edit", map[string]any{"path": "main.go", "oldString": "func a() {}", "newString": "func c() {}", "replaceAll": true})),
		"replaced 2 occurrences")
	if got := readFile(t, p); strings.Count(got, "func c() {}") != 2 || strings.Contains(got, "func a") {
		t.Fatalf("replaceAll: %q", got)
	}

	writeFile(t, e.home, "blob", "ab\x00cd")
	mustFail(t, e.run(t, "edit", map[string]any{"path": "blob", "oldString": "ab", "newString": "x"}), "binary file")
}

func TestRewritesKeepXattrs(t *testing.T) {
	e := newEnv(t)
	p := writeFile(t, e.home, "meta.txt", "a\n")
	if err := unix.Setxattr(p, "user.e2b.owner", []byte("team-x"), 0); err != nil {
		t.Skipf("no user xattrs here: %v", err)
	}
	mustOK(t, e.run(t, "edit", map[string]any{"path": "meta.txt", "oldString": "a", "newString": "b"}))
	mustOK(t, e.run(t, "write", map[string]any{"path": "meta.txt", "content": "c\n"}))
	mustOK(t, e.run(t, "apply_patch", map[string]any{"patch": "--- a/meta.txt\n+++ b/meta.txt\n@@ -1 +1 @@\n-c\n+d\n"}))
	buf := make([]byte, 64)
	n, err := unix.Getxattr(p, "user.e2b.owner", buf)
	if err != nil || string(buf[:n]) != "team-x" || readFile(t, p) != "d\n" {
		t.Fatalf("xattr after rewrites: %q %v", buf[:n], err)
	}
}

func TestEditKeepsCRLF(t *testing.T) {
	e := newEnv(t)
	p := writeFile(t, e.home, "win.txt", "first\r\nsecond\r\nthird\r\n")
	// oldString and newString written with \n, as a model copies from read.
	mustOK(t, e.run(t, "edit", map[string]any{"path": "win.txt", "oldString": "first\nsecond", "newString": "1st\n2nd\nadded"}))
	if got := readFile(t, p); got != "1st\r\n2nd\r\nadded\r\nthird\r\n" {
		t.Fatalf("CRLF lost: %q", got)
	}
	// With \r\n given, it matches as is.
	mustOK(t, e.run(t, "edit", map[string]any{"path": "win.txt", "oldString": "added\r\nthird", "newString": "3rd"}))
	if got := readFile(t, p); got != "1st\r\n2nd\r\n3rd\r\n" {
		t.Fatalf("got %q", got)
	}
	// An LF file stays LF even when the model sends \r\n.
	lf := writeFile(t, e.home, "unix.txt", "a\nb\nc\n")
	mustOK(t, e.run(t, "edit", map[string]any{"path": "unix.txt", "oldString": "a\r\nb", "newString": "x\r\ny"}))
	if got := readFile(t, lf); got != "x\ny\nc\n" {
		t.Fatalf("got %q", got)
	}
}
