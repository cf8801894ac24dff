package runtimetest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
	"github.com/warrenhq/warren/internal/runtime"
)

// ResultsDir is where a Box's host results directory appears inside it.
const ResultsDir = "/results"

// HostResources may be implemented by a runtime, or by a test's wrapper
// around one, to name the host paths (cgroup directories, state directory)
// that exist exactly while sandbox id exists. The suite then checks that
// they exist while the sandbox runs and are gone after Destroy and after a
// failed Start.
type HostResources interface {
	HostResources(id string) ([]string, error)
}

// Box is one sandbox started for a test. Its Init writes into Results (the
// host side of /results) and touches /results/done when its script is over.
type Box struct {
	Spec    runtime.Spec
	Status  runtime.Status
	Results string // host directory bind-mounted at /results
	Log     string // host file receiving PID 1's stdout and stderr
	rt      runtime.Runtime
}

// ShellInit is an Init that runs script with busybox sh, touches
// /results/done, then stays up as a PID 1 that reaps its children.
func ShellInit(script string) []string {
	return []string{"/bin/sh", "-c", script + "\ntouch " + ResultsDir + "/done\nwhile :; do sleep 1; done"}
}

// NewSpec returns a spec for a fresh id that runs init in rootfs with a
// results directory and a log file. Tests adjust it before StartBox.
func NewSpec(t *testing.T, rootfs string, init []string) (runtime.Spec, string) {
	t.Helper()
	results := t.TempDir()
	id := ids.New(12)
	return runtime.Spec{
		ID:       id,
		RootFS:   rootfs,
		Hostname: "box-" + id[:6],
		Init:     init,
		Env:      []string{"PATH=/bin", "HOME=/root"},
		Cwd:      "/",
		Mounts:   []runtime.Mount{{Source: results, Destination: ResultsDir}},
		LogPath:  filepath.Join(t.TempDir(), "init.log"),
	}, results
}

// StartBox starts spec (from NewSpec) on rt and destroys it when the test
// ends, whatever happens.
func StartBox(t *testing.T, rt runtime.Runtime, spec runtime.Spec, results string) *Box {
	t.Helper()
	return StartBoxWith(t, rt, spec, results, func(spec runtime.Spec) (runtime.Status, error) {
		return rt.Start(context.Background(), spec)
	})
}

// StartBoxWith is StartBox with another way to start the sandbox (a
// restore from a checkpoint, say).
func StartBoxWith(t *testing.T, rt runtime.Runtime, spec runtime.Spec, results string, start func(runtime.Spec) (runtime.Status, error)) *Box {
	t.Helper()
	t.Cleanup(func() { destroyQuietly(t, rt, spec.ID) })
	st, err := start(spec)
	if err != nil {
		t.Fatalf("start %s: %v", spec.ID, err)
	}
	return &Box{Spec: spec, Status: st, Results: results, Log: spec.LogPath, rt: rt}
}

// RunScript starts a sandbox whose PID 1 runs script (see ShellInit).
// edit, if not nil, adjusts the spec first (limits, mounts).
func RunScript(t *testing.T, rt runtime.Runtime, rootfs, script string, edit func(*runtime.Spec)) *Box {
	t.Helper()
	spec, results := NewSpec(t, rootfs, ShellInit(script))
	if edit != nil {
		edit(&spec)
	}
	return StartBox(t, rt, spec, results)
}

func destroyQuietly(t *testing.T, rt runtime.Runtime, id string) {
	err := rt.Destroy(context.Background(), id)
	if err != nil && !errors.Is(err, errdefs.ErrNotFound) && !errors.Is(err, errdefs.ErrInvalid) {
		t.Errorf("cleanup: Destroy(%s): %v", id, err)
	}
}

// WaitDone waits until the script has touched /results/done.
func (b *Box) WaitDone(t *testing.T, timeout time.Duration) {
	t.Helper()
	b.WaitFile(t, "done", timeout)
}

// WaitFile waits until /results/name exists.
func (b *Box) WaitFile(t *testing.T, name string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if _, err := os.Stat(filepath.Join(b.Results, name)); err == nil {
			return
		}
		if time.Now().After(deadline) {
			st, err := b.rt.Status(context.Background(), b.Spec.ID)
			t.Fatalf("sandbox %s: /results/%s not written within %s (status %+v, %v); init log:\n%s",
				b.Spec.ID, name, timeout, st, err, b.ReadLog())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Read returns /results/name with surrounding space trimmed ("" if absent).
func (b *Box) Read(name string) string {
	data, _ := os.ReadFile(filepath.Join(b.Results, name))
	return strings.TrimSpace(string(data))
}

// ReadLog returns what PID 1 wrote to stdout and stderr so far.
func (b *Box) ReadLog() string {
	data, _ := os.ReadFile(b.Log)
	return string(data)
}

// Destroy destroys the sandbox now (the cleanup then finds nothing).
func (b *Box) Destroy(t *testing.T) {
	t.Helper()
	if err := b.rt.Destroy(context.Background(), b.Spec.ID); err != nil {
		t.Fatalf("Destroy(%s): %v", b.Spec.ID, err)
	}
}

// procStartTime returns a process's start time (field 22 of
// /proc/pid/stat), which tells a live process from a reused pid.
func procStartTime(pid int) (string, bool) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return "", false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", false
	}
	f := strings.Fields(s[i+1:])
	// After "(comm)": state is field 3, starttime field 22.
	if len(f) < 20 {
		return "", false
	}
	// A zombie (killed, not yet reaped by its parent) or a dead task is
	// not alive.
	if f[0] == "Z" || f[0] == "X" {
		return f[19], false
	}
	return f[19], true
}
