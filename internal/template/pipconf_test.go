package template

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWritePipConf(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writePipConf(root, []string{"python3"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "etc/pip.conf")); !os.IsNotExist(err) {
		t.Fatalf("a tree without pip got a pip.conf (%v)", err)
	}
	if err := writePipConf(root, []string{"python3", "python3-pip"}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "etc/pip.conf"))
	if err != nil || string(b) != pipConf {
		t.Fatalf("pip.conf: %q, %v", b, err)
	}
	// One the tree has already is kept.
	if err := os.WriteFile(filepath.Join(root, "etc/pip.conf"), []byte("[global]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writePipConf(root, []string{"python3-pip"}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "etc/pip.conf")); string(b) != "[global]\n" {
		t.Fatalf("an existing pip.conf was replaced: %q", b)
	}
}
