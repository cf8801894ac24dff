package gvisor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
	rt "github.com/warrenhq/warren/internal/runtime"
	"github.com/warrenhq/warren/internal/runtime/runtimetest"
	"github.com/warrenhq/warren/internal/testutil"
)

// helpers are static binaries the tests build once: warren-gvisor-init
// (unless WARREN_BIN has it) and a unix-socket client for the sandbox.
var helpers struct {
	dir    string
	init   string
	udsCat string
	err    error
}

func TestMain(m *testing.M) {
	code := func() int {
		dir, err := os.MkdirTemp("", "warren-gvisor-test-")
		if err != nil {
			helpers.err = err
			return m.Run()
		}
		defer os.RemoveAll(dir)
		helpers.dir = dir
		helpers.init, helpers.err = buildInit(dir)
		if helpers.err == nil {
			helpers.udsCat, helpers.err = buildGo(dir, "udscat", udsCatSource)
		}
		return m.Run()
	}()
	os.Exit(code)
}

// buildInit builds warren-gvisor-init from this tree (so that a test never
// runs a stale copy), or falls back to $WARREN_BIN's when there is no Go
// toolchain.
func buildInit(dir string) (string, error) {
	_, file, _, _ := runtime.Caller(0)
	out := filepath.Join(dir, "warren-gvisor-init")
	cmd := exec.Command("go", "build", "-o", out, "./gvisorinit")
	cmd.Dir = filepath.Dir(file)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		if bin := os.Getenv("WARREN_BIN"); bin != "" {
			if p := filepath.Join(bin, "warren-gvisor-init"); executableFile(p) {
				return p, nil
			}
		}
		return "", fmt.Errorf("build warren-gvisor-init: %v: %s", err, msg)
	}
	return out, nil
}

// buildGo builds a one-file static program.
func buildGo(dir, name, src string) (string, error) {
	srcDir := filepath.Join(dir, name+"-src")
	if err := os.MkdirAll(srcDir, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(srcDir, "main.go"), []byte(src), 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(srcDir, "go.mod"), []byte("module "+name+"\n\ngo 1.22\n"), 0o644); err != nil {
		return "", err
	}
	out := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-o", out, ".")
	cmd.Dir = srcDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=mod")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s: %v: %s", name, err, msg)
	}
	return out, nil
}

// udsCatSource connects to a unix socket, sends its second argument and
// prints the reply; with -l it listens on the socket instead, says so and
// stays.
const udsCatSource = `package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"time"
)

func main() {
	if os.Args[1] == "-l" {
		ln, err := net.Listen("unix", os.Args[2])
		if err != nil {
			fmt.Println("listen:", err)
			os.Exit(1)
		}
		defer ln.Close()
		fmt.Println("listening")
		time.Sleep(time.Hour)
		return
	}
	c, err := net.Dial("unix", os.Args[1])
	if err != nil {
		fmt.Println("dial:", err)
		os.Exit(1)
	}
	c.Write([]byte(os.Args[2]))
	c.(*net.UnixConn).CloseWrite()
	b, _ := io.ReadAll(c)
	fmt.Printf("%s\n", b)
}
`

// requireRunsc returns the runsc binary the tests use. `make test` builds it
// and sets WARREN_RUNSC, so its absence is a failure.
func requireRunsc(t *testing.T) string { return requireRunscB(t) }

func requireRunscB(t testing.TB) string {
	t.Helper()
	testutil.RequireRoot(t)
	p := os.Getenv("WARREN_RUNSC")
	if p == "" {
		testutil.Missing(t, "WARREN_RUNSC is not set: the gvisor runtime needs runsc; `make runsc` builds it and `make test` sets it")
	}
	if !executableFile(p) {
		testutil.Missing(t, "WARREN_RUNSC=%s is not an executable file: build it with `make runsc`", p)
	}
	if helpers.err != nil {
		t.Fatalf("test helpers: %v", helpers.err)
	}
	return p
}

// withResources adds the runtimetest.HostResources check to a Runtime.
type withResources struct{ *Runtime }

func (w withResources) HostResources(id string) ([]string, error) {
	dirs, err := w.cgroupDirs(id)
	if err != nil {
		return nil, err
	}
	return append(dirs, w.cgroups.bundles.bundle(id)), nil
}

// newTestRuntime returns a factory of Runtime values that share one state
// directory and one cgroup parent private to the calling test. The first
// value is probed (the test fails when runsc cannot run sandboxes here). When the test ends every sandbox left is destroyed, the parent
// cgroups are removed and runsc's state directory must be empty.
func newTestRuntime(t *testing.T) func(t *testing.T) *Runtime {
	runsc := requireRunsc(t)
	stateDir := t.TempDir()
	parent := "warren-test-" + ids.New(8)
	mk := func(t *testing.T) *Runtime {
		t.Helper()
		r, err := New(Options{Runsc: runsc, Init: helpers.init, StateDir: stateDir, CgroupParent: parent, Logger: testLogger(t)})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		return r
	}
	r := mk(t)
	t.Cleanup(func() {
		bg := context.Background()
		left, _ := r.List(bg)
		for _, id := range left {
			if err := r.Destroy(bg, id); err != nil {
				t.Errorf("cleanup: leftover sandbox %s: %v", id, err)
			}
		}
		r.RemoveParentCgroups()
		if dirs, err := r.expectedCgroupDirs("x"); err == nil {
			for _, d := range dirs {
				if _, err := os.Stat(filepath.Dir(d)); err == nil {
					t.Errorf("cleanup: parent cgroup %s left behind", filepath.Dir(d))
				}
			}
		}
		if entries, _ := os.ReadDir(r.lifecycle.runsc.root); len(entries) > 0 {
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			t.Errorf("cleanup: runsc state left behind in %s: %v", r.lifecycle.runsc.root, names)
		}
	})
	if err := r.Probe(context.Background()); err != nil {
		testutil.Missing(t, "runsc %s cannot run sandboxes here: %v", runsc, err)
	}
	return mk
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
		func(t *testing.T) rt.Runtime { return withResources{mk(t)} },
		runtimetest.BusyboxRootfs)
}

func TestNewRejectsBadOptions(t *testing.T) {
	testutil.RequireRoot(t)
	bin := "/bin/true"
	for name, opts := range map[string]Options{
		"no state dir":      {Runsc: bin, Init: bin},
		"absolute cgroup":   {Runsc: bin, Init: bin, StateDir: t.TempDir(), CgroupParent: "/abs"},
		"dotdot cgroup":     {Runsc: bin, Init: bin, StateDir: t.TempDir(), CgroupParent: "a/../../b"},
		"no runsc":          {Init: bin, StateDir: t.TempDir()},
		"missing runsc":     {Runsc: "/no/such/runsc", Init: bin, StateDir: t.TempDir()},
		"relative runsc":    {Runsc: "runsc", Init: bin, StateDir: t.TempDir()},
		"no init":           {Runsc: bin, StateDir: t.TempDir()},
		"non-exec init":     {Runsc: bin, Init: "/etc/passwd", StateDir: t.TempDir()},
		"directory as init": {Runsc: bin, Init: "/", StateDir: t.TempDir()},
	} {
		if _, err := New(opts); err == nil {
			t.Errorf("New with %s succeeded", name)
		}
	}
}

// A runsc that is not runsc, or one that cannot start a sandbox, is
// ErrUnavailable with a message that says so; never a panic.
func TestProbeRejectsBrokenRunsc(t *testing.T) {
	testutil.RequireRoot(t)
	if helpers.err != nil {
		t.Fatalf("test helpers: %v", helpers.err)
	}
	fake := filepath.Join(t.TempDir(), "runsc")
	for name, script := range map[string]string{
		"fails":       "#!/bin/sh\necho 'cannot execute: cgo' >&2\nexit 1\n",
		"not runsc":   "#!/bin/sh\necho 'hello'\n",
		"cannot boot": "#!/bin/sh\ncase \"$*\" in *--version*) echo 'runsc version x'; exit 0;; esac\necho boom >&2; exit 128\n",
	} {
		if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		r, err := New(Options{Runsc: fake, Init: helpers.init, StateDir: t.TempDir(), CgroupParent: "warren-test-" + ids.New(8), Logger: testLogger(t)})
		if err != nil {
			t.Fatalf("%s: New: %v", name, err)
		}
		err = r.Probe(context.Background())
		if !errors.Is(err, errdefs.ErrUnavailable) {
			t.Errorf("%s: Probe = %v; want ErrUnavailable", name, err)
		}
		if err2 := r.Probe(context.Background()); err2 == nil || err2.Error() != err.Error() {
			t.Errorf("%s: second Probe = %v; want the cached %v", name, err2, err)
		}
		if list, _ := r.List(context.Background()); len(list) != 0 {
			t.Errorf("%s: probe left sandboxes %v", name, list)
		}
		t.Logf("%s: %v", name, err)
	}
}

func TestProbe(t *testing.T) {
	mk := newTestRuntime(t)
	r := mk(t)
	if err := r.Probe(context.Background()); err != nil {
		t.Fatalf("Probe: %v", err)
	}
	if r.Version() == "" {
		t.Errorf("Version() is empty after a successful Probe")
	}
	t.Logf("runsc %s", r.Version())
}
