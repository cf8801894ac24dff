package runtimetest

import (
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"sync"
	"testing"
)

var setids struct {
	once sync.Once
	path string
	err  error
	out  []byte
}

// SetidsBinary builds (once per test binary) the static setids helper
// (see setids/main.go) and returns its path. Tests install it setuid root
// inside a sandbox to try escapes with setuid available.
func SetidsBinary(t testing.TB) string {
	t.Helper()
	setids.once.Do(func() {
		_, self, _, _ := goruntime.Caller(0)
		dir, err := os.MkdirTemp("", "warren-setids-")
		if err != nil {
			setids.err = err
			return
		}
		setids.path = filepath.Join(dir, "setids")
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", setids.path, "./setids")
		cmd.Dir = filepath.Dir(self)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		setids.out, setids.err = cmd.CombinedOutput()
	})
	if setids.err != nil {
		t.Fatalf("build the setids helper: %v\n%s", setids.err, setids.out)
	}
	return setids.path
}

// InstallSetuid copies the file at src into rootfs at dst (a path inside
// it), owned by root and mode 4755: a setuid-root program.
func InstallSetuid(t testing.TB, rootfs, src, dst string) {
	t.Helper()
	target := filepath.Join(rootfs, dst)
	if err := copyFile(src, target, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(target, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(target, 0o755|os.ModeSetuid); err != nil {
		t.Fatal(err)
	}
}
