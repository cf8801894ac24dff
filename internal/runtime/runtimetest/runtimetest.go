package runtimetest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
	"github.com/warrenhq/warren/internal/runtime"
)

// scriptTimeout bounds how long a sandbox's script may take to report.
const scriptTimeout = 15 * time.Second

// Run is the conformance suite. newRuntime returns a new Runtime value each
// call; all values returned for one test must share their state (as a
// daemon restarted on the same data directory would), which is how Recover
// is tested. rootfs returns a fresh writable root filesystem holding
// busybox (BusyboxRootfs does). If the runtime implements HostResources,
// the suite also checks that nothing is left on the host.
func Run(t *testing.T, newRuntime func(t *testing.T) runtime.Runtime, rootfs func(t *testing.T) string) {
	s := &suite{newRuntime: newRuntime, rootfs: rootfs}
	t.Run("Lifecycle", s.lifecycle)
	t.Run("UnknownIDs", s.unknownIDs)
	t.Run("InvalidSpec", s.invalidSpec)
	t.Run("DuplicateID", s.duplicateID)
	t.Run("Limits", s.limits)
	t.Run("DefaultLimits", s.defaultLimits)
	t.Run("SpecApplied", s.specApplied)
	t.Run("InitExits", s.initExits)
	t.Run("Recover", s.recover)
	t.Run("FailedStartLeavesNothing", s.failedStart)
	t.Run("WritesReachRootFS", s.writesReachRootFS)
	t.Run("PidsLimitEnforced", s.pidsLimitEnforced)
	t.Run("SignalInit", s.signalInit)
	t.Run("BootID", s.bootID)
}

// InitSignaller may be implemented by a runtime to signal a sandbox's PID 1
// (a graceful stop sends SIGTERM to the agent).
type InitSignaller interface {
	SignalInit(ctx context.Context, id string, sig syscall.Signal) error
}

type suite struct {
	newRuntime func(t *testing.T) runtime.Runtime
	rootfs     func(t *testing.T) string
}

var bg = context.Background()

const idleScript = "echo up > /results/up"

// tickScript counts in /results/tick about twenty times a second, in a
// child of PID 1, so that a test can see whether the sandbox runs.
const tickScript = idleScript + `
(i=0; while :; do i=$((i+1)); echo $i > /results/tick.tmp; mv /results/tick.tmp /results/tick; sleep 0.05; done) &`

func (s *suite) lifecycle(t *testing.T) {
	rt := s.newRuntime(t)
	b := RunScript(t, rt, s.rootfs(t), tickScript, nil)
	id := b.Spec.ID
	if b.Status.ID != id || b.Status.State != runtime.StateRunning || b.Status.InitPID <= 0 {
		t.Fatalf("Start returned %+v; want running with an init pid", b.Status)
	}
	if b.Status.Created.IsZero() {
		t.Errorf("Start: Created is zero")
	}
	b.WaitDone(t, scriptTimeout)
	b.WaitFile(t, "tick", scriptTimeout)
	if got := b.Read("up"); got != "up" {
		t.Fatalf("PID 1 did not write /results/up (got %q); log:\n%s", got, b.ReadLog())
	}
	startTime, alive := procStartTime(b.Status.InitPID)
	if !alive {
		t.Fatalf("init pid %d is not a live host process", b.Status.InitPID)
	}
	mustAlive(t, rt, id, true)
	st := mustStatus(t, rt, id, runtime.StateRunning)
	if st.InitPID != b.Status.InitPID {
		t.Errorf("Status pid %d != Start pid %d", st.InitPID, b.Status.InitPID)
	}
	if list := mustList(t, rt); !slices.Contains(list, id) {
		t.Errorf("List() = %v; missing %s", list, id)
	}
	checkHostResources(t, rt, id, true)

	if rt.Capabilities().Pause {
		if err := rt.Pause(bg, id); err != nil {
			t.Fatalf("Pause: %v", err)
		}
		mustStatus(t, rt, id, runtime.StatePaused)
		mustAlive(t, rt, id, true)
		if err := rt.Pause(bg, id); err != nil {
			t.Errorf("Pause of a paused sandbox: %v; want nil", err)
		}
		// A frozen sandbox makes no progress; a thawed one does.
		frozen := b.Read("tick")
		time.Sleep(300 * time.Millisecond)
		if now := b.Read("tick"); now != frozen {
			t.Errorf("paused sandbox kept running: tick %s -> %s", frozen, now)
		}
		if err := rt.Resume(bg, id); err != nil {
			t.Fatalf("Resume: %v", err)
		}
		mustStatus(t, rt, id, runtime.StateRunning)
		waitChange(t, b, "tick", frozen)
		if err := rt.Resume(bg, id); err != nil {
			t.Errorf("Resume of a running sandbox: %v; want nil", err)
		}
		// Pause then Destroy: a frozen sandbox must still be destroyable.
		if err := rt.Pause(bg, id); err != nil {
			t.Fatalf("Pause: %v", err)
		}
	} else {
		if err := rt.Pause(bg, id); !errors.Is(err, errdefs.ErrUnsupported) {
			t.Errorf("Pause without Capabilities().Pause = %v; want ErrUnsupported", err)
		}
	}

	b.Destroy(t)
	if _, err := rt.Status(bg, id); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Status after Destroy = %v; want ErrNotFound", err)
	}
	mustAlive(t, rt, id, false)
	if list := mustList(t, rt); slices.Contains(list, id) {
		t.Errorf("List() after Destroy still has %s", id)
	}
	if st, alive := procStartTime(b.Status.InitPID); alive && st == startTime {
		t.Errorf("init pid %d still alive after Destroy", b.Status.InitPID)
	}
	checkHostResources(t, rt, id, false)
	// Destroying twice is safe: the id is simply unknown now.
	if err := rt.Destroy(bg, id); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("second Destroy = %v; want nil or ErrNotFound", err)
	}
}

func (s *suite) unknownIDs(t *testing.T) {
	rt := s.newRuntime(t)
	id := ids.New(12)
	check := func(op string, err error) {
		t.Helper()
		if !errors.Is(err, errdefs.ErrNotFound) {
			t.Errorf("%s(unknown id) = %v; want ErrNotFound", op, err)
		}
	}
	_, err := rt.Status(bg, id)
	check("Status", err)
	_, err = rt.Recover(bg, id)
	check("Recover", err)
	check("Destroy", rt.Destroy(bg, id))
	if rt.Capabilities().Pause {
		check("Pause", rt.Pause(bg, id))
		check("Resume", rt.Resume(bg, id))
	}
}

func (s *suite) invalidSpec(t *testing.T) {
	rt := s.newRuntime(t)
	root := s.rootfs(t)
	good, _ := NewSpec(t, root, ShellInit(idleScript))
	for name, edit := range map[string]func(*runtime.Spec){
		"bad id":        func(sp *runtime.Spec) { sp.ID = "Bad/ID" },
		"empty init":    func(sp *runtime.Spec) { sp.Init = nil },
		"relative root": func(sp *runtime.Spec) { sp.RootFS = "rootfs" },
		"relative dest": func(sp *runtime.Spec) { sp.Mounts = []runtime.Mount{{Source: root, Destination: "mnt"}} },
	} {
		sp := good
		sp.ID = ids.New(12)
		edit(&sp)
		t.Cleanup(func() { destroyQuietly(t, rt, sp.ID) })
		if _, err := rt.Start(bg, sp); !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("Start with %s = %v; want ErrInvalid", name, err)
		}
	}
}

func (s *suite) duplicateID(t *testing.T) {
	rt := s.newRuntime(t)
	first := RunScript(t, rt, s.rootfs(t), idleScript, nil)
	spec2, _ := NewSpec(t, s.rootfs(t), ShellInit(idleScript))
	spec2.ID = first.Spec.ID
	if _, err := rt.Start(bg, spec2); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Fatalf("second Start with id %s = %v; want ErrAlreadyExists", spec2.ID, err)
	}
	st := mustStatus(t, rt, first.Spec.ID, runtime.StateRunning)
	if st.InitPID != first.Status.InitPID {
		t.Errorf("first sandbox's pid changed from %d to %d", first.Status.InitPID, st.InitPID)
	}
	if _, alive := procStartTime(first.Status.InitPID); !alive {
		t.Errorf("first sandbox's PID 1 died")
	}
	checkHostResources(t, rt, first.Spec.ID, true)
}

// limitsScript writes the sandbox's own cgroup limits, read from inside,
// as "mem", "pids" and "cpu" ("<quota> <period>"; quota "max" = none).
const limitsScript = `cg=/sys/fs/cgroup
if [ -f $cg/cgroup.controllers ]; then
  cat $cg/memory.max > /results/mem
  cat $cg/pids.max > /results/pids
  cat $cg/cpu.max > /results/cpu
else
  cat $cg/memory/memory.limit_in_bytes > /results/mem
  cat $cg/pids/pids.max > /results/pids
  echo "$(cat $cg/cpu/cpu.cfs_quota_us) $(cat $cg/cpu/cpu.cfs_period_us)" > /results/cpu
fi`

func (s *suite) limits(t *testing.T) {
	want := runtime.Limits{MemoryBytes: 96 << 20, CPUMillis: 500, Pids: 77}
	s.checkLimits(t, want, want)
}

func (s *suite) defaultLimits(t *testing.T) {
	s.checkLimits(t, runtime.Limits{}, runtime.DefaultLimits)
}

func (s *suite) checkLimits(t *testing.T, set, want runtime.Limits) {
	rt := s.newRuntime(t)
	b := RunScript(t, rt, s.rootfs(t), limitsScript, func(sp *runtime.Spec) { sp.Limits = set })
	b.WaitDone(t, scriptTimeout)
	if got := b.Read("mem"); got != strconv.FormatInt(want.MemoryBytes, 10) {
		t.Errorf("memory limit = %q; want %d (log: %s)", got, want.MemoryBytes, b.ReadLog())
	}
	if got := b.Read("pids"); got != strconv.FormatInt(want.Pids, 10) {
		t.Errorf("pids.max = %q; want %d", got, want.Pids)
	}
	f := strings.Fields(b.Read("cpu"))
	if len(f) != 2 {
		t.Fatalf("cpu quota = %q; want \"<quota> <period>\"", b.Read("cpu"))
	}
	quota, err1 := strconv.ParseInt(f[0], 10, 64)
	period, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil || period <= 0 || quota*1000/period != want.CPUMillis {
		t.Errorf("cpu quota/period = %q; want %d millicpus", b.Read("cpu"), want.CPUMillis)
	}
}

const specScript = `hostname > /results/hostname
pwd > /results/pwd
echo "$GREETING" > /results/env
cat /etc/ro-file > /results/ro-read
if echo x > /etc/ro-file 2>/dev/null; then echo writable; else echo readonly; fi > /results/ro-write
echo hello-rw > /data/rw
echo to-stdout
echo to-stderr >&2`

func (s *suite) specApplied(t *testing.T) {
	rt := s.newRuntime(t)
	hostDir := t.TempDir()
	roFile := filepath.Join(t.TempDir(), "ro-file")
	if err := os.WriteFile(roFile, []byte("ro-content\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := RunScript(t, rt, s.rootfs(t), specScript, func(sp *runtime.Spec) {
		sp.Hostname = "agentbox"
		sp.Cwd = "/tmp"
		sp.Env = append(sp.Env, "GREETING=hi there")
		// A file mount on a path that does not exist in the rootfs, and a
		// directory mount on a new directory: the runtime creates both.
		sp.Mounts = append(sp.Mounts,
			runtime.Mount{Source: roFile, Destination: "/etc/ro-file", ReadOnly: true},
			runtime.Mount{Source: hostDir, Destination: "/data"})
	})
	b.WaitDone(t, scriptTimeout)
	for name, want := range map[string]string{
		"hostname": "agentbox",
		"pwd":      "/tmp",
		"env":      "hi there",
		"ro-read":  "ro-content",
		"ro-write": "readonly",
	} {
		if got := b.Read(name); got != want {
			t.Errorf("%s = %q; want %q", name, got, want)
		}
	}
	if data, _ := os.ReadFile(filepath.Join(hostDir, "rw")); strings.TrimSpace(string(data)) != "hello-rw" {
		t.Errorf("write through rw bind mount: host sees %q", data)
	}
	if data, _ := os.ReadFile(roFile); string(data) != "ro-content\n" {
		t.Errorf("read-only file mount was changed: %q", data)
	}
	log := b.ReadLog()
	if !strings.Contains(log, "to-stdout") || !strings.Contains(log, "to-stderr") {
		t.Errorf("init log %s = %q; want both stdout and stderr", b.Log, log)
	}
}

// mustAlive checks runtime.IsAlive (the runtime's own liveness check when
// it has one) against want.
func mustAlive(t *testing.T, rt runtime.Runtime, id string, want bool) {
	t.Helper()
	alive, err := runtime.IsAlive(bg, rt, id)
	if err != nil || alive != want {
		t.Fatalf("IsAlive(%s) = %v, %v; want %v", id, alive, err, want)
	}
}

func (s *suite) initExits(t *testing.T) {
	rt := s.newRuntime(t)
	spec, results := NewSpec(t, s.rootfs(t), []string{"/bin/sh", "-c", "echo bye > /results/bye"})
	b := StartBox(t, rt, spec, results)
	deadline := time.Now().Add(scriptTimeout)
	for {
		st, err := rt.Status(bg, b.Spec.ID)
		if err != nil {
			t.Fatalf("Status: %v", err)
		}
		if st.State == runtime.StateStopped {
			if st.InitPID != 0 {
				t.Errorf("stopped sandbox reports init pid %d; want 0", st.InitPID)
			}
			mustAlive(t, rt, b.Spec.ID, false)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox still %s after its init exited", st.State)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if b.Read("bye") != "bye" {
		t.Errorf("init did not run to completion")
	}
	if rt.Capabilities().Pause {
		if err := rt.Pause(bg, b.Spec.ID); !errors.Is(err, errdefs.ErrConflict) {
			t.Errorf("Pause of a stopped sandbox = %v; want ErrConflict", err)
		}
	}
	checkHostResources(t, rt, b.Spec.ID, true) // resources remain until Destroy
	b.Destroy(t)
	checkHostResources(t, rt, b.Spec.ID, false)
}

func (s *suite) recover(t *testing.T) {
	rt1 := s.newRuntime(t)
	b := RunScript(t, rt1, s.rootfs(t), idleScript, nil)
	b.WaitDone(t, scriptTimeout)

	// A new Runtime value over the same state: a restarted daemon.
	rt2 := s.newRuntime(t)
	if list := mustList(t, rt2); !slices.Contains(list, b.Spec.ID) {
		t.Fatalf("new runtime's List() = %v; missing %s", list, b.Spec.ID)
	}
	st, err := rt2.Recover(bg, b.Spec.ID)
	if err != nil {
		t.Fatalf("Recover: %v", err)
	}
	if st.State != runtime.StateRunning || st.InitPID != b.Status.InitPID {
		t.Fatalf("Recover = %+v; want running with pid %d", st, b.Status.InitPID)
	}
	mustAlive(t, rt2, b.Spec.ID, true)
	if rt2.Capabilities().Pause {
		if err := rt2.Pause(bg, b.Spec.ID); err != nil {
			t.Fatalf("Pause after Recover: %v", err)
		}
		mustStatus(t, rt1, b.Spec.ID, runtime.StatePaused)
		if err := rt2.Resume(bg, b.Spec.ID); err != nil {
			t.Fatalf("Resume after Recover: %v", err)
		}
	}
	if err := rt2.Destroy(bg, b.Spec.ID); err != nil {
		t.Fatalf("Destroy after Recover: %v", err)
	}
	if _, err := rt1.Status(bg, b.Spec.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("old runtime's Status after Destroy = %v; want ErrNotFound", err)
	}
	checkHostResources(t, rt2, b.Spec.ID, false)
}

func (s *suite) failedStart(t *testing.T) {
	rt := s.newRuntime(t)
	spec, results := NewSpec(t, s.rootfs(t), []string{"/no/such/init"})
	t.Cleanup(func() { destroyQuietly(t, rt, spec.ID) })
	if _, err := rt.Start(bg, spec); err == nil {
		t.Fatalf("Start with a missing init binary succeeded")
	}
	if _, err := rt.Status(bg, spec.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Status after failed Start = %v; want ErrNotFound", err)
	}
	if list := mustList(t, rt); slices.Contains(list, spec.ID) {
		t.Errorf("List() after failed Start still has %s", spec.ID)
	}
	checkHostResources(t, rt, spec.ID, false)

	// The id is free again.
	spec.Init = ShellInit(idleScript)
	spec.ID = ids.New(12)
	StartBox(t, rt, spec, results)
}

// writesReachRootFS: what the sandbox writes, /tmp included, is in its root
// filesystem on the host at once, with nothing held back inside the
// runtime, so that a snapshot of the tree taken while it is paused sees it.
func (s *suite) writesReachRootFS(t *testing.T) {
	rt := s.newRuntime(t)
	root := s.rootfs(t)
	script := "echo in-tmp > /tmp/file\n" +
		"mkdir -p /work/sub && echo content > /work/sub/file\n" +
		"echo gone > /work/old && rm /work/old\n" +
		"mv /work/sub/file /work/sub/moved\n"
	b := RunScript(t, rt, root, script, nil)
	b.WaitDone(t, scriptTimeout)
	if rt.Capabilities().Pause {
		if err := rt.Pause(bg, b.Spec.ID); err != nil {
			t.Fatalf("Pause: %v", err)
		}
	}
	for path, want := range map[string]string{"tmp/file": "in-tmp\n", "work/sub/moved": "content\n"} {
		if data, err := os.ReadFile(filepath.Join(root, path)); err != nil || string(data) != want {
			t.Errorf("host reads %s = %q, %v; want %q", path, data, err, want)
		}
	}
	for _, gone := range []string{"work/old", "work/sub/file"} {
		if _, err := os.Stat(filepath.Join(root, gone)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("host still sees %s (%v)", gone, err)
		}
	}
}

// pidsLimitEnforced: forks beyond the pids limit fail inside (EAGAIN) and
// the sandbox survives them. At the limit nothing can fork, so the count is
// a shell glob and the cleanup a builtin kill.
func (s *suite) pidsLimitEnforced(t *testing.T) {
	rt := s.newRuntime(t)
	const limit = 40
	script := "(i=0; while [ $i -lt 100 ]; do sleep 1000 & i=$((i+1)); done) 2>/results/forkerr\n" +
		"set -- /proc/[0-9]*; echo $# > /results/nprocs\n" +
		"kill -9 -1; wait\n" +
		"echo alive > /results/alive\n"
	b := RunScript(t, rt, s.rootfs(t), script, func(sp *runtime.Spec) { sp.Limits.Pids = limit })
	b.WaitDone(t, scriptTimeout)
	if n, err := strconv.Atoi(b.Read("nprocs")); err != nil || n > limit || n < limit/2 {
		t.Errorf("processes inside at the limit = %q; want close to but at most %d", b.Read("nprocs"), limit)
	}
	if b.Read("forkerr") == "" {
		t.Errorf("100 forks under a limit of %d all succeeded", limit)
	}
	if b.Read("alive") != "alive" {
		t.Errorf("the sandbox did not survive hitting its pids limit")
	}
	mustStatus(t, rt, b.Spec.ID, runtime.StateRunning)
}

// signalInit: a signal reaches PID 1, whose handler runs; unknown ids are
// ErrNotFound. Runtimes without SignalInit skip it.
func (s *suite) signalInit(t *testing.T) {
	rt := s.newRuntime(t)
	si, ok := rt.(InitSignaller)
	if !ok {
		t.Skipf("the %s runtime does not implement SignalInit", rt.Name())
	}
	// Written aside and renamed: the file appears whole or not at all.
	b := RunScript(t, rt, s.rootfs(t), "trap 'echo got-term > /results/term.tmp; mv /results/term.tmp /results/term; exit 0' TERM", nil)
	b.WaitDone(t, scriptTimeout)
	if err := si.SignalInit(bg, b.Spec.ID, syscall.SIGTERM); err != nil {
		t.Fatalf("SignalInit: %v", err)
	}
	b.WaitFile(t, "term", scriptTimeout)
	if got := b.Read("term"); got != "got-term" {
		t.Errorf("PID 1's TERM handler wrote %q", got)
	}
	deadline := time.Now().Add(scriptTimeout)
	for {
		st, err := rt.Status(bg, b.Spec.ID)
		if err != nil {
			t.Fatalf("Status: %v", err)
		}
		if st.State == runtime.StateStopped {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox still %s after PID 1 exited on SIGTERM", st.State)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := si.SignalInit(bg, ids.New(12), syscall.SIGTERM); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("SignalInit(unknown id) = %v; want ErrNotFound", err)
	}
}

// waitChange waits until /results/name no longer reads old.
func waitChange(t *testing.T, b *Box, name, old string) {
	t.Helper()
	deadline := time.Now().Add(scriptTimeout)
	for b.Read(name) == old {
		if time.Now().After(deadline) {
			t.Fatalf("/results/%s stuck at %q", name, old)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func mustStatus(t *testing.T, rt runtime.Runtime, id string, want runtime.State) runtime.Status {
	t.Helper()
	st, err := rt.Status(bg, id)
	if err != nil {
		t.Fatalf("Status(%s): %v", id, err)
	}
	if st.State != want {
		t.Fatalf("Status(%s).State = %s; want %s", id, st.State, want)
	}
	if st.ID != id {
		t.Errorf("Status(%s).ID = %q", id, st.ID)
	}
	if (want == runtime.StateStopped) != (st.InitPID == 0) {
		t.Errorf("Status(%s) = %s with init pid %d", id, st.State, st.InitPID)
	}
	return st
}

func mustList(t *testing.T, rt runtime.Runtime) []string {
	t.Helper()
	list, err := rt.List(bg)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	return list
}

// checkHostResources checks, when rt names them, that id's host resources
// all exist (exist=true) or are all gone.
func checkHostResources(t *testing.T, rt runtime.Runtime, id string, exist bool) {
	t.Helper()
	hr, ok := rt.(HostResources)
	if !ok {
		return
	}
	paths, err := hr.HostResources(id)
	if err != nil {
		t.Fatalf("HostResources(%s): %v", id, err)
	}
	for _, p := range paths {
		_, err := os.Stat(p)
		switch {
		case exist && err != nil:
			t.Errorf("sandbox %s: %s missing while it exists: %v", id, p, err)
		case !exist && err == nil:
			t.Errorf("sandbox %s: %s left behind", id, p)
		}
	}
}
