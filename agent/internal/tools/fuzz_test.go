package tools

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzParsePatch feeds the patch parser arbitrary text: it must answer a
// parse or an error, never panic or loop, and what it accepts must have
// sane hunks.
func FuzzParsePatch(f *testing.F) {
	for _, seed := range []string{
		"--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n",
		"diff --git a/x b/y\nsimilarity index 100%\nrename from x\nrename to y\n",
		"--- /dev/null\n+++ b/new\n@@ -0,0 +1 @@\n+hi\n\\ No newline at end of file\n",
		"--- a/x\n+++ b/x\n@@ -1 +1 @@\n",
		"@@ -1,1 +1,1 @@\n-a\n+b\n",
		"--- a/\"q\\\"uoted\"\n+++ b/\"q\\\"uoted\"\n@@ -1 +1 @@\n-a\n+b\n",
		"--- a/x\n+++ b/x\n@@ -99999999999999999999,1 +1 @@\n-a\n+b\n",
		"",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		files, err := parsePatch(text)
		if err != nil {
			return
		}
		for _, fp := range files {
			for _, h := range fp.hunks {
				if h == nil {
					t.Fatalf("a nil hunk from %q", text)
				}
				_ = h.old()
				_ = h.new()
			}
			_ = fp.name()
		}
	})
}

// FuzzApplyPatch applies arbitrary patches in a scratch home: never a
// panic, and a refused patch leaves every file as it was.
func FuzzApplyPatch(f *testing.F) {
	f.Add("--- a/f.txt\n+++ b/f.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\n")
	f.Add("--- a/f.txt\n+++ b/f.txt\n@@ -1,3 +1,3 @@\n one\n-TWO\n+2\n three\n")
	f.Add("--- /dev/null\n+++ b/sub/new.txt\n@@ -0,0 +1,2 @@\n+a\n+b\n")
	f.Add("--- a/f.txt\n+++ /dev/null\n@@ -1,3 +0,0 @@\n-one\n-two\n-three\n")
	f.Fuzz(func(t *testing.T, patch string) {
		e := newEnv(t)
		const orig = "one\ntwo\nthree\n"
		path := filepath.Join(e.home, "f.txt")
		if err := os.WriteFile(path, []byte(orig), 0o644); err != nil {
			t.Fatal(err)
		}
		res, err := e.runErr("apply_patch", map[string]any{"patch": patch}, nil)
		if err != nil {
			return // refused as a bad call (e.g. params), before touching anything
		}
		if res.IsError {
			if got, _ := os.ReadFile(path); string(got) != orig {
				t.Fatalf("a refused patch changed f.txt to %q:\n%s\n%s", got, patch, res.Content)
			}
		}
	})
}
