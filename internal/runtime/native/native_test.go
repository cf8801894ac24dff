package native

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/warrenhq/warren/internal/ids"
	"github.com/warrenhq/warren/internal/runtime"
	"github.com/warrenhq/warren/internal/runtime/runtimetest"
	"github.com/warrenhq/warren/internal/testutil"
)

// TestMain makes the test binary usable as libcontainer's "init": during
// tests /proc/self/exe is this binary.
func TestMain(m *testing.M) {
	Init()
	if os.Getenv(envDaemonSpec) != "" {
		fakeDaemon() // TestSandboxSurvivesDaemonKill's stand-in daemon
	}
	os.Exit(m.Run())
}

// withResources adds the runtimetest.HostResources check to a Runtime.
type withResources struct{ *Runtime }

func (w withResources) HostResources(id string) ([]string, error) {
	dirs, err := w.cgroupDirs(id)
	if err != nil {
		return nil, err
	}
	return append(dirs, filepath.Join(w.stateDir, id)), nil
}

// newTestRuntime returns a factory of Runtime values that share one state
// directory and one cgroup parent private to the calling test; the parent
// cgroups are removed when the test ends.
func newTestRuntime(t *testing.T) func(t *testing.T) *Runtime {
	testutil.RequireRoot(t)
	stateDir := t.TempDir()
	parent := "warren-test-" + ids.New(8)
	mk := func(t *testing.T) *Runtime {
		t.Helper()
		r, err := New(Options{StateDir: stateDir, CgroupParent: parent, Logger: testLogger(t)})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		return r
	}
	r := mk(t)
	t.Cleanup(func() {
		// Runs after every sandbox's own cleanup (LIFO): the parents are
		// empty by then.
		ids, _ := r.List(context.Background())
		for _, id := range ids {
			if err := r.Destroy(context.Background(), id); err != nil {
				t.Errorf("cleanup: leftover sandbox %s: %v", id, err)
			}
		}
		removeCgroupParent(t, r)
	})
	return mk
}

// removeCgroupParent removes r's (empty) CgroupParent directories.
func removeCgroupParent(t testing.TB, r *Runtime) {
	dirs, err := r.cgroupDirs("x")
	if err != nil {
		t.Errorf("cleanup: cgroup dirs: %v", err)
		return
	}
	for _, d := range dirs {
		if err := os.Remove(filepath.Dir(d)); err != nil && !os.IsNotExist(err) {
			t.Errorf("cleanup: remove cgroup parent: %v", err)
		}
	}
}

func testLogger(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func TestConformance(t *testing.T) {
	mk := newTestRuntime(t)
	runtimetest.Run(t,
		func(t *testing.T) runtime.Runtime { return withResources{mk(t)} },
		runtimetest.BusyboxRootfs)
}

func TestNewRejectsBadOptions(t *testing.T) {
	for _, opts := range []Options{
		{},
		{StateDir: t.TempDir(), CgroupParent: "/abs"},
		{StateDir: t.TempDir(), CgroupParent: "a/../../b"},
	} {
		if _, err := New(opts); err == nil {
			t.Errorf("New(%+v) succeeded", opts)
		}
	}
}

// PID 1 must not hold a pipe to the daemon (it would break when the daemon
// dies): its stdio are the log file and /dev/null.
func TestInitStdioIsNotAPipe(t *testing.T) {
	mk := newTestRuntime(t)
	r := mk(t)
	b := runtimetest.RunScript(t, r, runtimetest.BusyboxRootfs(t), "true", nil)
	for fd, want := range map[string]string{"0": "/dev/null", "1": b.Log, "2": b.Log} {
		got, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(b.Status.InitPID), "fd", fd))
		if err != nil {
			t.Fatalf("readlink fd %s: %v", fd, err)
		}
		if got != want {
			t.Errorf("PID 1's fd %s -> %q; want %q", fd, got, want)
		}
	}
}
