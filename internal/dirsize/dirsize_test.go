package dirsize

import (
	"os"
	"path/filepath"
	"testing"
)

func TestOf(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, n := range map[string]int{"a": 10, "sub/b": 32} {
		if err := os.WriteFile(filepath.Join(dir, name), make([]byte, n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("a", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if got, err := Of(dir); err != nil || got != 42 {
		t.Errorf("Of = %d, %v; want 42 (regular files only)", got, err)
	}
	if _, err := Of(filepath.Join(dir, "missing")); err == nil {
		t.Error("Of of a missing directory: no error")
	}
}
