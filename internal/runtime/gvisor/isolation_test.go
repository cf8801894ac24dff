package gvisor

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
	rt "github.com/warrenhq/warren/internal/runtime"
	"github.com/warrenhq/warren/internal/runtime/runtimetest"
)

const scriptTimeout = 30 * time.Second

// The sandbox's processes talk to gVisor's kernel, not the host's: they see
// another kernel, gVisor's boot log and /proc/gvisor, and none of them is a
// process of the host kernel.
func TestGVisorKernel(t *testing.T) {
	r := newTestRuntime(t)(t)
	tag := strconv.Itoa(900000 + int(time.Now().UnixNano()%99999))
	script := "uname -r > /results/uname\n" +
		"dmesg > /results/dmesg\n" +
		"cat /proc/version > /results/version\n" +
		"if [ -d /proc/gvisor ]; then echo yes; else echo no; fi > /results/procgvisor\n" +
		"sleep " + tag + " &\n" +
		"echo $! > /results/sleeppid\n"
	b := runtimetest.RunScript(t, r, runtimetest.BusyboxRootfs(t), script, nil)
	b.WaitDone(t, scriptTimeout)

	var host unix.Utsname
	if err := unix.Uname(&host); err != nil {
		t.Fatal(err)
	}
	hostRelease := unix.ByteSliceToString(host.Release[:])
	if got := b.Read("uname"); got == hostRelease || !strings.Contains(got, "gvisor") {
		t.Errorf("uname -r inside = %q (host %q); want gVisor's kernel", got, hostRelease)
	}
	if got := b.Read("dmesg"); !strings.Contains(got, "Starting gVisor") {
		t.Errorf("dmesg inside = %q; want gVisor's boot log", got)
	}
	if got := b.Read("version"); !strings.Contains(got, "gvisor") {
		t.Errorf("/proc/version inside = %q", got)
	}
	if got := b.Read("procgvisor"); got != "yes" {
		t.Errorf("/proc/gvisor inside: %s", got)
	}
	// The sleep runs inside (it has a pid there) but no host process runs
	// it: gVisor's kernel implements it.
	if got := b.Read("sleeppid"); got == "" {
		t.Fatalf("sleep did not start inside")
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		data, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(data), "sleep\x00"+tag) {
			t.Errorf("the sandbox's `sleep %s` is a host process: %s", tag, p)
		}
	}
}

// The user's pids limit is N inside, as pids.max and RLIMIT_NPROC (the
// conformance suite checks that forks beyond it fail); the host cgroup holds
// a larger backstop for gVisor's own threads.
func TestPidsLimitMapping(t *testing.T) {
	r := newTestRuntime(t)(t)
	const limit = 40
	script := "cat /sys/fs/cgroup/pids/pids.max > /results/inside\n" +
		"ulimit -u > /results/nproc\n"
	b := runtimetest.RunScript(t, r, runtimetest.BusyboxRootfs(t), script, func(s *rt.Spec) {
		s.Limits.Pids = limit
	})
	b.WaitDone(t, scriptTimeout)
	for _, name := range []string{"inside", "nproc"} {
		if got := b.Read(name); got != strconv.Itoa(limit) {
			t.Errorf("%s = %q; want %d", name, got, limit)
		}
	}
	dirs, err := r.cgroupDirs(b.Spec.ID)
	if err != nil {
		t.Fatal(err)
	}
	dir, ok := r.controllerDir(dirs, "pids")
	if !ok {
		t.Fatalf("no pids cgroup among %v", dirs)
	}
	data, err := os.ReadFile(filepath.Join(dir, "pids.max"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(data)); got != strconv.FormatInt(hostPidsLimit(limit), 10) {
		t.Errorf("host pids.max = %s; want %d", got, hostPidsLimit(limit))
	}
}

// The agent's link: a process inside connects to a socket the host listens
// on in a read-only bind mount, and again after the host replaced the
// socket (what a daemon restart does). A socket bound inside a writable
// bind mount is gVisor's own: nothing on the host can connect to it.
func TestHostSocket(t *testing.T) {
	r := newTestRuntime(t)(t)
	sockDir := t.TempDir()
	dataDir := t.TempDir()
	sock := filepath.Join(sockDir, "agent.sock")
	serve := func(reply string) (stop func()) {
		t.Helper()
		_ = os.Remove(sock)
		ln, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				buf := make([]byte, 64)
				n, _ := c.Read(buf)
				c.Write([]byte(reply + ":" + string(buf[:n])))
				c.Close()
			}
		}()
		return func() { ln.Close(); <-done }
	}
	stop := serve("first")
	defer func() { stop() }()

	script := "/udscat /run/agent/agent.sock one > /results/one 2>&1\n" +
		"touch /results/one.done\n" +
		"while [ ! -f /results/go ]; do sleep 0.05; done\n" +
		"/udscat /run/agent/agent.sock two > /results/two 2>&1\n" +
		"/udscat -l /data/own.sock > /results/own 2>&1 &\n" +
		"while [ ! -s /results/own ]; do sleep 0.05; done\n"
	b := runtimetest.RunScript(t, r, runtimetest.BusyboxRootfs(t), script, func(s *rt.Spec) {
		s.Mounts = append(s.Mounts,
			rt.Mount{Source: helpers.udsCat, Destination: "/udscat", ReadOnly: true},
			rt.Mount{Source: sockDir, Destination: "/run/agent", ReadOnly: true},
			rt.Mount{Source: dataDir, Destination: "/data"})
	})
	b.WaitFile(t, "one.done", scriptTimeout)
	if got := b.Read("one"); got != "first:one" {
		t.Errorf("first connection from inside got %q; want first:one", got)
	}
	// A restarted daemon: the old socket file is replaced by a new one.
	stop()
	stop = serve("second")
	if err := os.WriteFile(filepath.Join(b.Results, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	b.WaitDone(t, scriptTimeout)
	if got := b.Read("two"); got != "second:two" {
		t.Errorf("connection after the socket was replaced got %q; want second:two", got)
	}
	if got := b.Read("own"); got != "listening" {
		t.Fatalf("listen inside: %q", got)
	}
	if c, err := net.Dial("unix", filepath.Join(dataDir, "own.sock")); err == nil {
		c.Close()
		t.Errorf("the host connected to a socket the sandbox bound")
	}
}

// Limits change in place: the host cgroups and what the sandbox reads
// inside; Stats reports the new limits and gVisor's own counts.
func TestUpdateLimitsAndStats(t *testing.T) {
	r := newTestRuntime(t)(t)
	bg := context.Background()
	// PID 1 keeps writing its own RLIMIT_NPROC (a shell builtin reads it).
	script := "sleep 1000 &\n(while :; do ulimit -u > /results/nproc.tmp; mv /results/nproc.tmp /results/nproc; sleep 0.05; done) &\n"
	b := runtimetest.RunScript(t, r, runtimetest.BusyboxRootfs(t), script, func(s *rt.Spec) {
		s.Limits = rt.Limits{MemoryBytes: 256 << 20, CPUMillis: 500, Pids: 64}
		s.Mounts = append(s.Mounts, rt.Mount{Source: helpers.udsCat, Destination: "/udscat", ReadOnly: true})
	})
	b.WaitDone(t, scriptTimeout)
	id := b.Spec.ID

	st, err := r.Stats(bg, id)
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	if st.MemoryLimit != 256<<20 || st.CPULimitMillis != 500 || st.PidsLimit != 64 {
		t.Errorf("Stats limits = %+v", st)
	}
	if st.Pids < 2 || st.Pids > 10 || st.CPUUsageNanos == 0 || st.MemoryBytes <= 0 {
		t.Errorf("Stats counters = %+v; want gVisor's count of the few tasks inside", st)
	}

	want := rt.Limits{MemoryBytes: 192 << 20, CPUMillis: 250, Pids: 33}
	if err := r.UpdateLimits(bg, id, want); err != nil {
		t.Fatalf("UpdateLimits: %v", err)
	}
	read := func(ctrl, file string) string {
		t.Helper()
		out, err := r.lifecycle.runsc.out(bg, "read-control", id, ctrl, "/"+id, file)
		if err != nil {
			t.Fatalf("read %s inside: %v", file, err)
		}
		return strings.TrimSpace(string(out))
	}
	for file, v := range map[string]string{
		"memory.limit_in_bytes": strconv.FormatInt(want.MemoryBytes, 10),
		"cpu.cfs_quota_us":      "25000",
		"pids.max":              "33",
	} {
		ctrl, _, _ := strings.Cut(file, ".")
		if got := read(ctrl, file); got != v {
			t.Errorf("%s inside = %s; want %s", file, got, v)
		}
	}
	// The processes' RLIMIT_NPROC, which enforces the pids limit: the
	// running ones change, and what they fork inherits it.
	deadline := time.Now().Add(scriptTimeout)
	for b.Read("nproc") != "33" {
		if time.Now().After(deadline) {
			t.Fatalf("RLIMIT_NPROC inside stayed %q after the update; want 33", b.Read("nproc"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	dirs, err := r.cgroupDirs(id)
	if err != nil {
		t.Fatal(err)
	}
	if dir, ok := r.controllerDir(dirs, "pids"); ok {
		data, _ := os.ReadFile(filepath.Join(dir, "pids.max"))
		if got := strings.TrimSpace(string(data)); got != strconv.FormatInt(hostPidsLimit(33), 10) {
			t.Errorf("host pids.max = %s; want %d", got, hostPidsLimit(33))
		}
	}
	if dir, ok := r.controllerDir(dirs, "memory"); ok && !r.cgroups.host.unified {
		data, _ := os.ReadFile(filepath.Join(dir, "memory.limit_in_bytes"))
		if got := strings.TrimSpace(string(data)); got != strconv.FormatInt(want.MemoryBytes, 10) {
			t.Errorf("host memory limit = %s; want %d", got, want.MemoryBytes)
		}
	}
	if st, err := r.Stats(bg, id); err != nil || st.MemoryLimit != want.MemoryBytes || st.PidsLimit != 33 || st.CPULimitMillis != 250 {
		t.Errorf("Stats after update = %+v, %v", st, err)
	}

	// runsc changes the limits of a running sandbox only.
	if err := r.Pause(bg, id); err != nil {
		t.Fatal(err)
	}
	if err := r.UpdateLimits(bg, id, rt.Limits{CPUMillis: 300}); !errors.Is(err, errdefs.ErrConflict) {
		t.Errorf("UpdateLimits while paused = %v; want ErrConflict", err)
	}
	if err := r.Resume(bg, id); err != nil {
		t.Fatal(err)
	}
	if err := r.UpdateLimits(bg, ids.New(12), rt.Limits{Pids: 50}); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("UpdateLimits(unknown) = %v; want ErrNotFound", err)
	}
}

// The escape probes every runtime refuses, run by the sandbox's root and by
// a user raised through a setuid-root binary, with and without
// no_new_privs: gVisor honours setuid bits (--allow-suid) unless the spec
// sets noNewPrivileges, and the raised user holds root's capabilities, no
// more.
func TestEscapesWithSetuid(t *testing.T) {
	r := newTestRuntime(t)(t)
	marker, port, accepted := runtimetest.HostBait(t)
	for _, nnp := range []bool{true, false} {
		t.Run(fmt.Sprintf("no_new_privs=%v", nnp), func(t *testing.T) {
			b := runtimetest.RunEscapeProbes(t, r, runtimetest.BusyboxRootfs(t), nnp, marker, port, "")
			// A user namespace, and a mount in it, are gVisor's kernel's
			// own: allowed, and harmless to the host.
			runtimetest.CheckEscapes(t, b, nnp, "unshare")
			if !nnp && b.Read("suidstatus") != b.Read("status") {
				t.Errorf("the raised user's status\n%s\ndiffers from root's\n%s", b.Read("suidstatus"), b.Read("status"))
			}
		})
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("host loopback listener accepted %d connection(s) from the sandbox", n)
	}
}
