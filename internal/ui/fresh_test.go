package ui

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/warrenhq/warren/internal/testutil"
)

// uiDir is the dashboard's sources, ui/ at the repository's root.
func uiDir(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "ui")
}

// The committed build (dist) is what `make ui` makes of the sources now, as
// with generated code: a change to ui/ must come with its build.
func TestCommittedBuildIsFresh(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the dashboard with node (make test runs it)")
	}
	dir := uiDir(t)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", ".package-lock.json")); err != nil {
		testutil.Missing(t, "ui/node_modules is missing: make ui-deps installs the dashboard's build tools with npm (%v)", err)
	}
	out := t.TempDir()
	cmd := exec.Command("npx", "--no-install", "vite", "build", "--outDir", out, "--emptyOutDir", "--logLevel", "warn")
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("vite build: %v\n%s", err, b)
	}
	fresh := readTree(t, os.DirFS(out))
	committed := readTree(t, Files())
	for name, b := range fresh {
		c, ok := committed[name]
		switch {
		case !ok:
			t.Errorf("%s is in a fresh build but not in internal/ui/dist: run make ui and commit it", name)
		case !bytes.Equal(b, c):
			t.Errorf("%s differs from a fresh build: run make ui and commit it", name)
		}
	}
	for name := range committed {
		if _, ok := fresh[name]; !ok {
			t.Errorf("internal/ui/dist/%s is not in a fresh build: run make ui and commit it", name)
		}
	}
}

func readTree(t *testing.T, fsys fs.FS) map[string][]byte {
	t.Helper()
	m := map[string][]byte{}
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(fsys, p)
		m[p] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}
