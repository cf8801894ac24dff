package tools

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/agent/internal/agenttest"
)

func TestApplyPatchMultiFile(t *testing.T) {
	e := newEnv(t)
	lines := make([]string, 30)
	for i := range lines {
		lines[i] = "line " + string(rune('A'+i%26)) + strings.Repeat("!", i/26)
	}
	a := writeFile(t, e.home, "src/a.txt", strings.Join(lines, "\n")+"\n")
	if err := os.Chmod(a, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, e.home, "old.txt", "bye\n")
	writeFile(t, e.home, "moved/from.txt", "keep\nchange me\n")
	patch := `Some commit message that is skipped.

diff --git a/src/a.txt b/src/a.txt
index 123..456 100755
--- a/src/a.txt
+++ b/src/a.txt
@@ -2,3 +2,4 @@
 line B
 line C
+inserted after C
 line D
@@ -20,3 +21,3 @@ some function context
 line T
-line U
+line U changed
 line V
--- /dev/null
+++ b/new/dir/created.txt
@@ -0,0 +1,2 @@
+hello
+world
diff --git a/old.txt b/old.txt
deleted file mode 100644
--- a/old.txt
+++ /dev/null
@@ -1 +0,0 @@
-bye
diff --git a/moved/from.txt b/moved/to.txt
similarity index 50%
rename from moved/from.txt
rename to moved/to.txt
--- a/moved/from.txt
+++ b/moved/to.txt
@@ -1,2 +1,2 @@
 keep
-change me
+changed
`
	got := mustOK(t, e.run(t, "apply_patch", map[string]any{"patch": patch}))
	h := e.home + "/"
	contains(t, got, "Applied the patch to 4 files:", "M "+h+"src/a.txt (2 hunks)", "A "+h+"new/dir/created.txt",
		"D "+h+"old.txt", "R "+h+"moved/from.txt -> "+h+"moved/to.txt (1 hunk)")

	want := append([]string{}, lines[:3]...)
	want = append(want, "inserted after C")
	want = append(want, lines[3:20]...)
	want = append(want, "line U changed")
	want = append(want, lines[21:]...)
	if got := readFile(t, a); got != strings.Join(want, "\n")+"\n" {
		t.Fatalf("a.txt:\n%s", got)
	}
	if fi, _ := os.Stat(a); fi.Mode().Perm() != 0o755 {
		t.Fatalf("mode %v not kept", fi.Mode())
	}
	if got := readFile(t, h+"new/dir/created.txt"); got != "hello\nworld\n" {
		t.Fatalf("created: %q", got)
	}
	if _, err := os.Stat(h + "old.txt"); !os.IsNotExist(err) {
		t.Fatalf("old.txt not deleted: %v", err)
	}
	if _, err := os.Stat(h + "moved/from.txt"); !os.IsNotExist(err) || readFile(t, h+"moved/to.txt") != "keep\nchanged\n" {
		t.Fatalf("rename: %v", err)
	}
	assertNoTemps(t, e.home)
}

func TestApplyPatchIsAtomic(t *testing.T) {
	e := newEnv(t)
	a := writeFile(t, e.home, "a.txt", "one\ntwo\nthree\n")
	b := writeFile(t, e.home, "b.txt", "alpha\nbeta\ngamma\n")
	del := writeFile(t, e.home, "del.txt", "x\n")
	old := time.Now().Add(-time.Hour)
	for _, p := range []string{a, b, del} {
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	// Every file's diff is fine except the second hunk of b.txt.
	patch := `--- a/a.txt
+++ b/a.txt
@@ -1,3 +1,3 @@
 one
-two
+TWO
 three
--- /dev/null
+++ b/fresh/new.txt
@@ -0,0 +1 @@
+new
--- a/del.txt
+++ /dev/null
@@ -1 +0,0 @@
-x
--- a/b.txt
+++ b/b.txt
@@ -1,2 +1,2 @@
-alpha
+ALPHA
 beta
@@ -3 +3 @@
-gamma ray
+GAMMA
`
	res := mustFail(t, e.run(t, "apply_patch", map[string]any{"patch": patch}),
		"hunk 2 of b.txt (@@ -3 +3 @@) does not apply", `expects "gamma ray" but the file has "gamma"`, "No file was changed")
	_ = res
	for p, want := range map[string]string{a: "one\ntwo\nthree\n", b: "alpha\nbeta\ngamma\n", del: "x\n"} {
		if got := readFile(t, p); got != want {
			t.Fatalf("%s changed to %q", p, got)
		}
		if fi, _ := os.Stat(p); !fi.ModTime().Equal(old) {
			t.Fatalf("%s was rewritten", p)
		}
	}
	if _, err := os.Stat(filepath.Join(e.home, "fresh")); !os.IsNotExist(err) {
		t.Fatalf("a failed patch left a directory: %v", err)
	}
	assertNoTemps(t, e.home)
}

func TestApplyPatchFindsMovedHunksAndKeepsCRLF(t *testing.T) {
	e := newEnv(t)
	p := writeFile(t, e.home, "win.txt", "h1\r\nh2\r\nh3\r\na\r\nb\r\nc\r\nlast")
	// The header says line 1, but the text is 3 lines further down; the
	// patch is written with plain \n; the file ends without a newline.
	patch := "--- win.txt\n+++ win.txt\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n@@ -4,1 +4,2 @@\n last\n\\ No newline at end of file\n+appended\n\\ No newline at end of file\n"
	got := mustOK(t, e.run(t, "apply_patch", map[string]any{"patch": patch}))
	contains(t, got, "hunk 1 of win.txt applied at line 4, +3 from where its header put it")
	if got := readFile(t, p); got != "h1\r\nh2\r\nh3\r\na\r\nB\r\nc\r\nlast\r\nappended" {
		t.Fatalf("got %q", got)
	}
}

func TestApplyPatchErrors(t *testing.T) {
	e := newEnv(t)
	writeFile(t, e.home, "exists.txt", "x\n")
	for _, tc := range []struct {
		patch string
		want  []string
	}{
		{"*** Begin Patch\n*** Update File: a\n", []string{"\"*** Begin Patch\" format", "unified diff"}},
		{"just some text\n", []string{"no file diffs"}},
		{"--- a/missing.txt\n+++ b/missing.txt\n@@ -1 +1 @@\n-a\n+b\n", []string{"changes " + e.home + "/missing.txt, which does not exist", "/dev/null"}},
		{"--- /dev/null\n+++ b/exists.txt\n@@ -0,0 +1 @@\n+y\n", []string{"creates it, but " + e.home + "/exists.txt already exists"}},
		{"--- a/exists.txt\n+++ b/exists.txt\n@@ -1 +1 @@\n-x\nforgot the space\n+y\n", []string{"line 5 of the patch", "\"forgot the space\" is not a hunk line"}},
		{"--- a/exists.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-y\n", []string{"hunk 1 of exists.txt", "does not apply"}},
		{"--- a/exists.txt\n+++ b/exists.txt\n@@ -1 +1 @@\n-x\n+y\n--- a/exists.txt\n+++ b/exists.txt\n@@ -1 +1 @@\n-x\n+z\n", []string{"hunk 1 of exists.txt", `expects "x" but the file has "y"`}},
	} {
		mustFail(t, e.run(t, "apply_patch", map[string]any{"patch": tc.patch}), append(tc.want, "No file was changed")...)
		if readFile(t, filepath.Join(e.home, "exists.txt")) != "x\n" {
			t.Fatalf("patch %q changed exists.txt", tc.patch)
		}
	}
	assertNoTemps(t, e.home)
}

func TestApplyPatchSameFileTwiceAndModes(t *testing.T) {
	e := newEnv(t)
	p := writeFile(t, e.home, "f.sh", "echo 1\n")
	// Two diffs of one file apply in order; git's new mode sets the mode.
	patch := "diff --git a/f.sh b/f.sh\nold mode 100644\nnew mode 100755\n--- a/f.sh\n+++ b/f.sh\n@@ -1 +1 @@\n-echo 1\n+echo 2\n" +
		"--- a/f.sh\n+++ b/f.sh\n@@ -1 +1,2 @@\n echo 2\n+echo 3\n"
	mustOK(t, e.run(t, "apply_patch", map[string]any{"patch": patch}))
	if got := readFile(t, p); got != "echo 2\necho 3\n" {
		t.Fatalf("got %q", got)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o755 {
		t.Fatalf("mode %v", fi.Mode())
	}
}

func TestApplyPatchOwnership(t *testing.T) {
	agenttest.RequireRoot(t)
	e := newEnvAs(t, 4321, 4322)
	mine := writeFile(t, e.home, "root.txt", "a\n")
	if err := os.Chown(mine, 0, 0); err != nil {
		t.Fatal(err)
	}
	patch := "--- a/root.txt\n+++ b/root.txt\n@@ -1 +1 @@\n-a\n+b\n--- /dev/null\n+++ b/sub/new.txt\n@@ -0,0 +1 @@\n+n\n"
	mustOK(t, e.run(t, "apply_patch", map[string]any{"patch": patch}))
	for p, want := range map[string][2]int{"root.txt": {0, 0}, "sub": {4321, 4322}, "sub/new.txt": {4321, 4322}} {
		fi, err := os.Stat(filepath.Join(e.home, p))
		if err != nil {
			t.Fatal(err)
		}
		if uid, gid := ownerOf(fi); uid != want[0] || gid != want[1] {
			t.Fatalf("%s owned by %d:%d, want %v", p, uid, gid, want)
		}
	}
}

func assertNoTemps(t *testing.T, dir string) {
	t.Helper()
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), tempPrefix) {
			t.Errorf("temporary file left: %s", p)
		}
		return nil
	})
}
