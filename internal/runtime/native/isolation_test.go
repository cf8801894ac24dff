package native

import (
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/runtime"
	"github.com/warrenhq/warren/internal/runtime/runtimetest"
)

// Every escape attempt must fail inside a sandbox, run by the sandbox's
// root and, with and without no_new_privs, by an unprivileged user who
// raised itself through a setuid-root binary: setuid must give nothing
// root lacks (docs/security.md).
func TestIsolation(t *testing.T) {
	mk := newTestRuntime(t)
	r := mk(t)
	marker, port, accepted := runtimetest.HostBait(t)
	extra := runtimetest.Probe("ownroot", "cat /proc/1/root/etc/passwd") + // the marker probe works
		"ls /sys/class/net > /results/netifs\n" +
		"tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' > /results/netdev\n" +
		"ls /proc | grep -c '^[0-9][0-9]*$' > /results/nprocs\n" +
		"cat /proc/self/cgroup > /results/cgroup\n" +
		"hostname > /results/hostname\n" +
		"ulimit -n > /results/nofile\n"
	for _, nnp := range []bool{true, false} {
		t.Run(fmt.Sprintf("no_new_privs=%v", nnp), func(t *testing.T) {
			b := runtimetest.RunEscapeProbes(t, r, runtimetest.BusyboxRootfs(t), nnp, marker, port, extra)
			runtimetest.CheckEscapes(t, b, nnp)
			for _, name := range []string{"insmod", "suid-insmod"} {
				if out := b.Read(name + ".out"); !strings.Contains(out, "not permitted") {
					t.Errorf("%s failed for another reason than EPERM: %q", name, out)
				}
			}
			checkSandboxView(t, r, b)
			checkStatus(t, b.Read("status"), nnp)
			if !nnp {
				// The raised user holds what root holds, no more.
				checkStatus(t, b.Read("suidstatus"), false)
			}
		})
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("host loopback listener accepted %d connection(s) from the sandbox", n)
	}
}

// checkSandboxView checks what the sandbox sees of itself: its own root,
// loopback only, its own processes and cgroups, its hostname and limits.
func checkSandboxView(t *testing.T, r *Runtime, b *runtimetest.Box) {
	t.Helper()
	if got := b.Read("ownroot"); got != "ok" {
		t.Errorf("reading the sandbox's own file through /proc/1/root failed (%s): the marker probe proves nothing", b.Read("ownroot.out"))
	}
	if got := b.Read("netifs"); got != "lo" {
		t.Errorf("/sys/class/net = %q; want only lo", got)
	}
	if got := b.Read("netdev"); got != "lo" {
		t.Errorf("/proc/net/dev interfaces = %q; want only lo", got)
	}
	if n, err := strconv.Atoi(b.Read("nprocs")); err != nil || n > 8 {
		t.Errorf("sandbox sees %q processes in /proc; want only its own few", b.Read("nprocs"))
	}
	for _, line := range strings.Split(b.Read("cgroup"), "\n") {
		if !strings.HasSuffix(line, ":/") {
			t.Errorf("/proc/self/cgroup line %q: the cgroup namespace should root every hierarchy at the sandbox", line)
		}
	}
	if got := b.Read("hostname"); got != b.Spec.Hostname {
		t.Errorf("hostname = %q; want %q", got, b.Spec.Hostname)
	}
	if want := strconv.FormatUint(min(uint64(wantNofile), r.host.nofileHard), 10); b.Read("nofile") != want {
		t.Errorf("open files limit = %q; want %s", b.Read("nofile"), want)
	}
}

// checkStatus checks seccomp mode, no_new_privs and the capability sets of
// a root process in the sandbox from its /proc/self/status lines.
func checkStatus(t *testing.T, status string, nnp bool) {
	t.Helper()
	want := capMask(t, defaultCapabilities())
	fields := map[string]string{}
	for _, line := range strings.Split(status, "\n") {
		k, v, _ := strings.Cut(line, ":")
		fields[k] = strings.TrimSpace(v)
	}
	if fields["Seccomp"] != "2" {
		t.Errorf("Seccomp = %q; want 2 (filter)", fields["Seccomp"])
	}
	if want := map[bool]string{true: "1", false: "0"}[nnp]; fields["NoNewPrivs"] != want {
		t.Errorf("NoNewPrivs = %q; want %s", fields["NoNewPrivs"], want)
	}
	for _, k := range []string{"CapEff", "CapBnd", "CapPrm"} {
		got, err := strconv.ParseUint(fields[k], 16, 64)
		if err != nil || got != want {
			t.Errorf("%s = %s; want %016x", k, fields[k], want)
		}
	}
	for _, k := range []string{"CapInh", "CapAmb"} {
		if got, _ := strconv.ParseUint(fields[k], 16, 64); got != 0 {
			t.Errorf("%s = %s; want 0", k, fields[k])
		}
	}
}

var capNumbers = map[string]uint{
	"CAP_CHOWN": 0, "CAP_DAC_OVERRIDE": 1, "CAP_FOWNER": 3, "CAP_FSETID": 4, "CAP_KILL": 5,
	"CAP_SETGID": 6, "CAP_SETUID": 7, "CAP_SETPCAP": 8, "CAP_NET_BIND_SERVICE": 10,
	"CAP_SYS_CHROOT": 18, "CAP_AUDIT_WRITE": 29, "CAP_SETFCAP": 31,
}

func capMask(t *testing.T, caps []string) uint64 {
	var m uint64
	for _, c := range caps {
		n, ok := capNumbers[c]
		if !ok {
			t.Fatalf("test does not know %s's number", c)
		}
		m |= 1 << n
	}
	return m
}

// A bounded fork bomb hits pids.max; the sandbox's PID 1 survives and can
// fork again once the bomb's processes exit, and the host is unaffected.
func TestForkBombContained(t *testing.T) {
	mk := newTestRuntime(t)
	r := mk(t)
	const pids = 64
	script := `
( i=0; while [ $i -lt 400 ]; do sleep 2 & i=$((i+1)); done ) >/results/bomb.out 2>&1
echo $? > /results/bomb.rc
cg=/sys/fs/cgroup; [ -f $cg/pids.events ] || cg=$cg/pids
cat $cg/pids.events > /results/events
# PID 1 survives and can fork again once the sleepers exit.
i=0; until ( true ) 2>/dev/null; do i=$((i+1)); [ $i -gt 100 ] && break; sleep 0.1; done
echo alive > /results/after`
	b := runtimetest.RunScript(t, r, runtimetest.BusyboxRootfs(t), script, func(sp *runtime.Spec) {
		sp.Limits.Pids = pids
	})
	b.WaitDone(t, 30*time.Second)
	t.Logf("bomb rc %s, pids.events %q, output %q", b.Read("bomb.rc"), b.Read("events"), b.Read("bomb.out"))
	if rc := b.Read("bomb.rc"); rc == "0" {
		t.Errorf("bomb subshell forked 400 processes under pids.max=%d (rc %s, out %q)", pids, rc, b.Read("bomb.out"))
	}
	if !strings.Contains(b.Read("bomb.out"), "fork") {
		t.Errorf("bomb output %q; want a fork failure", b.Read("bomb.out"))
	}
	if ev := b.Read("events"); !strings.HasPrefix(ev, "max ") || ev == "max 0" {
		t.Errorf("pids.events = %q; want the limit hit", ev)
	}
	if b.Read("after") != "alive" {
		t.Errorf("PID 1 did not survive the fork bomb")
	}
	if st := mustRunning(t, r, b.Spec.ID); st.InitPID != b.Status.InitPID {
		t.Errorf("PID 1 changed")
	}
	if err := exec.Command("true").Run(); err != nil {
		t.Errorf("host cannot fork after the bomb: %v", err)
	}
}

// Allocating past the memory limit gets that process OOM-killed; PID 1
// survives.
func TestMemoryLimitKillsHog(t *testing.T) {
	mk := newTestRuntime(t)
	r := mk(t)
	script := `
( dd if=/dev/zero of=/dev/null bs=200M count=1 ) >/results/hog.out 2>&1
echo $? > /results/hog.rc
cg=/sys/fs/cgroup
if [ -f $cg/memory.events ]; then grep '^oom_kill ' $cg/memory.events; else grep '^oom_kill ' $cg/memory/memory.oom_control; fi > /results/oom
echo alive > /results/after`
	b := runtimetest.RunScript(t, r, runtimetest.BusyboxRootfs(t), script, func(sp *runtime.Spec) {
		sp.Limits.MemoryBytes = 64 << 20
	})
	b.WaitDone(t, 30*time.Second)
	t.Logf("hog rc %s, %s, output %q", b.Read("hog.rc"), b.Read("oom"), b.Read("hog.out"))
	if rc := b.Read("hog.rc"); rc != "137" {
		t.Errorf("200 MiB allocation under a 64 MiB limit exited %q (%q); want 137 (SIGKILL)", rc, b.Read("hog.out"))
	}
	if oom := b.Read("oom"); oom == "" || strings.HasSuffix(oom, " 0") {
		t.Errorf("oom_kill counter = %q; want > 0", oom)
	}
	if b.Read("after") != "alive" {
		t.Errorf("PID 1 did not survive the OOM kill")
	}
	mustRunning(t, r, b.Spec.ID)
}

func mustRunning(t *testing.T, r *Runtime, id string) runtime.Status {
	t.Helper()
	st, err := r.Status(t.Context(), id)
	if err != nil || st.State != runtime.StateRunning {
		t.Fatalf("Status(%s) = %+v, %v; want running", id, st, err)
	}
	return st
}
