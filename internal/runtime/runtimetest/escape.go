package runtimetest

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/ids"
	"github.com/warrenhq/warren/internal/runtime"
)

// EscapeProbes are the escape attempts every sandbox must refuse, by name;
// %MARKER% and %PORT% stand for a host file and a host loopback port (see
// HostBait).
var EscapeProbes = map[string]string{
	"mount":      "mount -t tmpfs x /mnt",
	"remount":    "mount -o remount,rw /sys",
	"unshare":    "unshare -U -r -m sh -c 'mount -t tmpfs x /mnt'",
	"procsys":    "echo evil > /proc/sys/kernel/hostname",
	"sysrq":      "echo h > /proc/sysrq-trigger",
	"sysfs":      "touch /sys/kernel/evil",
	"hostmarker": "cat /proc/1/root%MARKER%",
	"insmod":     "printf junk > /tmp/evil.ko; insmod /tmp/evil.ko",
	"ping":       "ping -c1 -W1 127.0.0.1",
	"nc":         "echo hi | nc -w 2 127.0.0.1 %PORT%",
	"mknod":      "mknod /tmp/sda b 8 0",
	"kcore":      "test \"$(head -c 16 /proc/kcore | wc -c)\" -gt 0",
	"bootid":     "echo 00000000-0000-4000-8000-000000000000 > /proc/sys/kernel/random/boot_id",
	"unmountid":  "umount /proc/sys/kernel/random/boot_id",
}

// SuidPrefix runs a command as the sandbox's unprivileged user (uid 1000)
// who then raises itself to root through a setuid-root binary, as sudo
// does (RunEscapeProbes installs /bin/setids).
const SuidPrefix = "setids 1000 setids 0 "

// StatusLines is a command that prints the seccomp mode, no_new_privs and
// capability sets of the process running it.
const StatusLines = "grep -E '^(Seccomp|NoNewPrivs|CapEff|CapBnd|CapPrm|CapInh|CapAmb):' /proc/self/status"

// HostBait makes a file only the host has and a listener on the host's
// loopback, which no sandbox may read or reach; accepted counts the
// connections the listener took.
func HostBait(t *testing.T) (marker, port string, accepted *atomic.Int32) {
	t.Helper()
	marker = filepath.Join(os.TempDir(), "warren-host-marker-"+ids.New(8))
	if err := os.WriteFile(marker, []byte("host secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(marker) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted = new(atomic.Int32)
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
	return marker, strconv.Itoa(ln.Addr().(*net.TCPAddr).Port), accepted
}

// RunEscapeProbes starts a sandbox with or without no_new_privs whose init
// runs every escape probe twice, as root and as a user raised through a
// setuid-root binary (result files NAME and suid-NAME: "ok" or "fail",
// output in NAME.out), then suid-whoami (the raised user's uid), the
// raised process's status (suidstatus) and root's (status), then extra.
func RunEscapeProbes(t *testing.T, rt runtime.Runtime, rootfs string, nnp bool, marker, port, extra string) *Box {
	t.Helper()
	return RunEscapeProbesWith(t, rt, rootfs, func(sp *runtime.Spec) { sp.NoNewPrivileges = nnp }, marker, port, extra)
}

// RunEscapeProbesWith is RunEscapeProbes with the spec adjusted by edit
// (no_new_privs, a user namespace).
func RunEscapeProbesWith(t *testing.T, rt runtime.Runtime, rootfs string, edit func(*runtime.Spec), marker, port, extra string) *Box {
	t.Helper()
	InstallSetuid(t, rootfs, SetidsBinary(t), "bin/setids")
	if err := os.MkdirAll(filepath.Join(rootfs, "probes"), 0o755); err != nil {
		t.Fatal(err)
	}
	subst := strings.NewReplacer("%MARKER%", marker, "%PORT%", port)
	script := ""
	for name, cmd := range EscapeProbes {
		if err := os.WriteFile(filepath.Join(rootfs, "probes", name), []byte(subst.Replace(cmd)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		script += Probe(name, "sh /probes/"+name) + Probe("suid-"+name, SuidPrefix+"sh /probes/"+name)
	}
	script += Probe("suid-whoami", SuidPrefix+"id -u") +
		SuidPrefix + StatusLines + " > /results/suidstatus\n" +
		StatusLines + " > /results/status\n" + extra
	b := RunScript(t, rt, rootfs, script, edit)
	b.WaitDone(t, 90*time.Second)
	return b
}

// Probe runs cmd in the sandbox and writes "ok" or "fail" to /results/name
// (and its output to /results/name.out). Each probe runs in a subshell so
// that nothing it does ends PID 1's script.
func Probe(name, cmd string) string {
	return "if ( " + cmd + " ) >/results/" + name + ".out 2>&1; then echo ok; else echo fail; fi >/results/" + name + "\n"
}

// CheckEscapes checks that every escape probe failed, as root and as the
// raised user, that the host's marker never showed, and that the setuid
// binary made the user root exactly when no_new_privs was off. A runtime
// names in except the probes its design lets succeed harmlessly.
func CheckEscapes(t *testing.T, b *Box, nnp bool, except ...string) {
	t.Helper()
	for name := range EscapeProbes {
		if slices.Contains(except, name) {
			continue
		}
		for _, n := range []string{name, "suid-" + name} {
			if got := b.Read(n); got != "fail" {
				t.Errorf("probe %s: %q (output %q); want it to fail", n, got, b.Read(n+".out"))
			}
			if strings.Contains(b.Read(n+".out"), "host secret") {
				t.Errorf("probe %s read the host's marker file", n)
			}
		}
	}
	if nnp {
		if got := b.Read("suid-whoami"); got != "fail" {
			t.Errorf("with no_new_privs a setuid-root binary raised a user to root: %q", b.Read("suid-whoami.out"))
		}
	} else if got := b.Read("suid-whoami.out"); got != "0" {
		t.Errorf("without no_new_privs a setuid-root binary did not make a user root: %q", got)
	}
}
