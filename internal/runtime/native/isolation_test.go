package native

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/ids"
	"github.com/warrenhq/warren/internal/runtime"
	"github.com/warrenhq/warren/internal/runtime/runtimetest"
)

// probe runs cmd in the sandbox and writes "ok" or "fail" to /results/name
// (and its output to /results/name.out). Each probe runs in a subshell so
// that nothing it does ends PID 1's script.
func probe(name, cmd string) string {
	return "if ( " + cmd + " ) >/results/" + name + ".out 2>&1; then echo ok; else echo fail; fi >/results/" + name + "\n"
}

// Every escape attempt below must fail inside a sandbox, with the sandbox's
// root running it.
func TestIsolation(t *testing.T) {
	mk := newTestRuntime(t)
	r := mk(t)

	// A file only the host has.
	marker := filepath.Join(os.TempDir(), "warren-host-marker-"+ids.New(8))
	if err := os.WriteFile(marker, []byte("host secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(marker) })

	// A listener on the host's loopback; the sandbox must not reach it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)

	script := "" +
		probe("mount", "mount -t tmpfs x /mnt") +
		probe("remount", "mount -o remount,rw /sys") +
		probe("unshare", "unshare -U -r -m sh -c 'mount -t tmpfs x /mnt'") +
		probe("procsys", "echo evil > /proc/sys/kernel/hostname") +
		probe("sysrq", "echo h > /proc/sysrq-trigger") +
		probe("sysfs", "touch /sys/kernel/evil") +
		probe("hostmarker", "cat /proc/1/root"+marker) +
		probe("ownroot", "cat /proc/1/root/etc/passwd") + // the probe itself works
		"printf junk > /tmp/evil.ko\n" +
		probe("insmod", "insmod /tmp/evil.ko") +
		probe("ping", "ping -c1 -W1 127.0.0.1") +
		probe("nc", "echo hi | nc -w 2 127.0.0.1 "+port) +
		probe("mknod", "mknod /tmp/sda b 8 0") +
		probe("kcore", "test \"$(head -c 16 /proc/kcore | wc -c)\" -gt 0") +
		"ls /sys/class/net > /results/netifs\n" +
		"tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' > /results/netdev\n" +
		"ls /proc | grep -c '^[0-9][0-9]*$' > /results/nprocs\n" +
		"cat /proc/self/cgroup > /results/cgroup\n" +
		"grep -E '^(Seccomp|NoNewPrivs|CapEff|CapBnd|CapPrm|CapInh|CapAmb):' /proc/self/status > /results/status\n" +
		"hostname > /results/hostname\n" +
		"ulimit -n > /results/nofile\n"
	b := runtimetest.RunScript(t, r, runtimetest.BusyboxRootfs(t), script, nil)
	b.WaitDone(t, 30*time.Second)

	for _, name := range []string{"mount", "remount", "unshare", "procsys", "sysrq", "sysfs", "hostmarker", "insmod", "ping", "nc", "mknod", "kcore"} {
		if got := b.Read(name); got != "fail" {
			t.Errorf("probe %s: %q (output %q); want it to fail", name, got, b.Read(name+".out"))
		} else {
			t.Logf("probe %s failed as it should: %s", name, b.Read(name+".out"))
		}
	}
	if got := b.Read("ownroot"); got != "ok" {
		t.Errorf("reading the sandbox's own file through /proc/1/root failed (%s): the marker probe proves nothing", b.Read("ownroot.out"))
	}
	if out := b.Read("insmod.out"); !strings.Contains(out, "not permitted") {
		t.Errorf("insmod failed for another reason than EPERM: %q", out)
	}
	if out := b.Read("hostmarker.out"); strings.Contains(out, "host secret") {
		t.Errorf("sandbox read the host's marker file")
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("host loopback listener accepted %d connection(s) from the sandbox", n)
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
	checkStatus(t, b.Read("status"))
}

// checkStatus checks seccomp mode, no_new_privs and the capability sets of
// a sandbox process from its /proc/self/status lines.
func checkStatus(t *testing.T, status string) {
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
	if fields["NoNewPrivs"] != "1" {
		t.Errorf("NoNewPrivs = %q; want 1", fields["NoNewPrivs"])
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
