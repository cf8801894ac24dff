// Package runtimetest is the conformance suite every runtime.Runtime passes,
// plus helpers for runtime-specific tests: a busybox root filesystem and
// sandboxes that report what they saw through a bind-mounted directory.
package runtimetest

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/warrenhq/warren/internal/testutil"
)

var (
	appletsOnce sync.Once
	applets     []string
	appletsErr  error
)

// BusyboxRootfs builds a minimal root filesystem in a fresh temporary
// directory from the host's busybox-static (Debian package busybox-static):
// /bin/busybox plus a symlink per applet, the usual mount points and an
// /etc/passwd. Each call returns a new, writable tree (about 2 MB).
func BusyboxRootfs(t *testing.T) string {
	t.Helper()
	return NewBusyboxRootfs(t)
}

// NewBusyboxRootfs is BusyboxRootfs for benchmarks and other testing.TB.
func NewBusyboxRootfs(t testing.TB) string {
	t.Helper()
	bb := testutil.RequireBinary(t, "busybox")
	appletsOnce.Do(func() {
		var out []byte
		out, appletsErr = exec.Command(bb, "--list").Output()
		applets = strings.Fields(string(out))
	})
	if appletsErr != nil {
		t.Fatalf("busybox --list: %v (install busybox-static)", appletsErr)
	}
	root := t.TempDir()
	for _, d := range []string{"bin", "dev", "etc", "proc", "sys", "tmp", "root", "mnt", "var/tmp"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(root, "tmp"), 0o1777); err != nil {
		t.Fatal(err)
	}
	// A copy, never a hard link: the sandbox may write to its /bin/busybox.
	if err := copyFile(bb, filepath.Join(root, "bin", "busybox"), 0o755); err != nil {
		t.Fatalf("copy busybox: %v", err)
	}
	for _, a := range applets {
		if a == "busybox" || strings.ContainsAny(a, "/[") {
			continue
		}
		if err := os.Symlink("busybox", filepath.Join(root, "bin", a)); err != nil && !os.IsExist(err) {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		"etc/passwd": "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n",
		"etc/group":  "root:x:0:\nnogroup:x:65534:\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(root, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
