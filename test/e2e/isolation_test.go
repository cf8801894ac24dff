package e2e

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/client"
)

// TestIsolation runs escape attempts inside a sandbox, through the real
// daemon and agent, in both privilege modes: with the server's defaults
// (no no_new_privs: sudo works) and with --no-new-privileges. Each probe
// runs as root and as the sandbox's user raised through a setuid-root
// helper; every one must fail either way. Both run in user namespaces (the
// default: root inside is an unprivileged uid on the host); a third run has
// setuid allowed and --userns=false, the old mode, where only capabilities
// and seccomp hold root back. (The runtimes' own suites run a wider set
// against bare libcontainer and runsc.)
func TestIsolation(t *testing.T) {
	t.Parallel()
	for _, nnp := range []bool{false, true} {
		t.Run(privilegeMode(nnp), func(t *testing.T) {
			t.Parallel()
			isolationProbes(t, nnp)
		})
	}
	t.Run("no-userns", func(t *testing.T) {
		t.Parallel()
		isolationProbes(t, false, "--userns=false")
	})
	t.Run("device", func(t *testing.T) {
		t.Parallel()
		isolationProbes(t, false, "--cdi-spec-dirs", testCDI(t))
	})
}

// privilegeMode names a no_new_privs mode in test names.
func privilegeMode(nnp bool) string {
	if nnp {
		return "no-new-privileges"
	}
	return "setuid-allowed"
}

// privilegeArgs are the daemon's arguments for a no_new_privs mode.
func privilegeArgs(nnp bool) []string {
	if nnp {
		return []string{"--no-new-privileges"}
	}
	return nil
}

// asRaisedUser wraps a shell command so that the sandbox's user runs it
// after raising itself to root through the setuid-root helper, as
// `sudo sh -c` would.
func asRaisedUser(cmd string) string {
	return "setids 0 sh -c " + shQuote(cmd)
}

func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func isolationProbes(t *testing.T, nnp bool, args ...string) {
	d := busyboxDaemon(t, append(privilegeArgs(nnp), args...)...)
	c := d.client()
	ctx := ctxT(t, 3*time.Minute)
	sb, err := c.Sandboxes.Create(ctx, withTestDevice(client.NewSandbox{TemplateID: "bb", Limits: &client.Limits{MemoryMB: 64, Pids: 64}}, args))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Sandboxes.Delete(ctx, sb.SandboxID) })
	installSetids(t, ctx, c, sb.SandboxID)
	// The control: the wrapper every probe below goes through works.
	raised := execAs(t, ctx, c, sb.SandboxID, "user", asRaisedUser("echo 'quoted' >/dev/null; id -u"))
	if got := strings.TrimSpace(raised.Stdout); nnp != (got != "0") {
		t.Fatalf("%s: the setuid helper gave the user uid %q (%+v)", privilegeMode(nnp), got, raised)
	}

	// A listener on the host's loopback that the sandbox must not reach.
	hostLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hostLn.Close()
	accepted := make(chan struct{}, 8)
	go func() {
		for {
			conn, err := hostLn.Accept()
			if err != nil {
				return
			}
			accepted <- struct{}{}
			conn.Close()
		}
	}()
	_, hostPort, _ := net.SplitHostPort(hostLn.Addr().String())
	_, daemonPort, _ := net.SplitHostPort(d.addr)

	run := func(cmd string) client.ExecResult {
		t.Helper()
		res, err := c.Commands.ExecWait(ctx, sb.SandboxID, client.ExecRequest{Command: cmd, User: "root", TimeoutMs: 20000})
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		return res
	}
	mustFail := func(name, cmd string) {
		t.Helper()
		for who, res := range map[string]client.ExecResult{"root": run(cmd), "raised user": execAs(t, ctx, c, sb.SandboxID, "user", asRaisedUser(cmd))} {
			if res.ExitCode == 0 {
				t.Errorf("%s as %s: succeeded inside the sandbox (stdout %q stderr %q)", name, who, res.Stdout, res.Stderr)
			}
		}
	}
	if who := run("id -u").Stdout; strings.TrimSpace(who) != "0" {
		t.Fatalf("probes must run as root in the sandbox, got uid %q", who)
	}
	mustFail("mount", "mount -t tmpfs none /mnt")
	mustFail("write /proc/sys", "echo 1 > /proc/sys/kernel/panic")
	mustFail("write /proc/sysrq-trigger", "echo h > /proc/sysrq-trigger")
	for _, cmd := range []string{"echo x > /tmp/x.ko; insmod /tmp/x.ko", asRaisedUser("insmod /tmp/x.ko")} {
		user := map[bool]string{true: "user", false: "root"}[strings.HasPrefix(cmd, "setids")]
		if res := execAs(t, ctx, c, sb.SandboxID, user, cmd); res.ExitCode == 0 || !strings.Contains(res.Stderr, "not permitted") {
			t.Errorf("%s: exit %d, %q; want EPERM", cmd, res.ExitCode, res.Stderr)
		}
	}
	mustFail("write the boot id", "echo 00000000-0000-4000-8000-000000000000 > /proc/sys/kernel/random/boot_id")
	mustFail("unmount the boot id", "umount /proc/sys/kernel/random/boot_id")
	mustFail("unshare a user namespace", "unshare -U -r true")
	mustFail("raw socket", "ping -c 1 -W 1 127.0.0.1")
	mustFail("reach a host loopback port", "nc -w 2 127.0.0.1 "+hostPort+" </dev/null")
	mustFail("reach the daemon's port", "nc -w 2 127.0.0.1 "+daemonPort+" </dev/null")
	mustFail("mknod a disk", "mknod /tmp/sda b 8 0")

	// The agent's link to the daemon is root's alone: a command running as
	// the sandbox's unprivileged user cannot connect to its socket (and so
	// cannot take over the commands and files the daemon sends).
	if res, err := c.Commands.ExecWait(ctx, sb.SandboxID, client.ExecRequest{Command: "test -w /.warren/run/agent.sock && echo writable || echo refused; id -u", User: "user"}); err != nil {
		t.Fatal(err)
	} else if !strings.HasPrefix(res.Stdout, "refused\n") || strings.TrimSpace(strings.TrimPrefix(res.Stdout, "refused\n")) == "0" {
		t.Errorf("an unprivileged command and the agent socket: %q %q", res.Stdout, res.Stderr)
	}

	// /proc/1/root is the sandbox's own root, and only the sandbox's own
	// processes are visible.
	if out := run("cat /proc/1/root/etc/hostname; ls /proc/1/root/").Stdout; strings.Contains(out, "lost+found") && strings.Contains(out, "vmlinuz") {
		t.Errorf("/proc/1/root shows the host's root: %q", out)
	}
	if out := run("ls -d /proc/[0-9]* | wc -l").Stdout; atoi(out) > 10 {
		t.Errorf("the sandbox sees %s processes; the host's are leaking in", strings.TrimSpace(out))
	}
	// PID 1's descriptors lead to nothing on the host: root in the sandbox
	// can open /proc/1/fd/N, so a host file there would be writable.
	for _, line := range strings.Split(strings.TrimSpace(run("for f in /proc/1/fd/*; do readlink $f; done").Stdout), "\n") {
		switch {
		case line == "": // closed between the glob and the readlink
		case line == "/dev/null", strings.HasPrefix(line, "socket:"), strings.HasPrefix(line, "pipe:"),
			strings.HasPrefix(line, "anon_inode:"), strings.HasPrefix(line, "/.warren/"), strings.HasPrefix(line, "/proc/"),
			strings.HasPrefix(line, "/sys/fs/cgroup/"): // the sandbox's own read-only cgroup view (Go reads its CPU quota)
		default:
			t.Errorf("the agent (PID 1) holds %q open; a sandbox's root could reach it through /proc/1/fd", line)
		}
	}
	if out := run("ls /sys/class/net").Stdout; strings.TrimSpace(out) != "lo" {
		t.Errorf("network interfaces inside: %q, want only lo", out)
	}

	// Allocating past the memory limit kills that process only.
	oom := run(`x=$(head -c 200000000 /dev/zero | tr "\0" a); echo ${#x}`)
	if oom.ExitCode != 137 {
		t.Errorf("holding 200 MB under a 64 MiB limit: exit %d (stdout %.40q), want 137 (OOM-killed)", oom.ExitCode, oom.Stdout)
	}
	if out := run("echo still alive").Stdout; out != "still alive\n" {
		t.Fatalf("after the OOM kill: %q", out)
	}
	// A fork bomb is held by pids.max; the sandbox stays usable.
	bomb := run("i=0; while [ $i -lt 300 ]; do sleep 2 & i=$((i+1)); done 2>&1 | head -c 200; cat /sys/fs/cgroup/pids/pids.events /sys/fs/cgroup/pids.events 2>/dev/null; true")
	if !strings.Contains(bomb.Stdout+bomb.Stderr, "fork") && !strings.Contains(bomb.Stdout, "max") {
		t.Errorf("the fork bomb was not stopped by pids.max: %q %q", bomb.Stdout, bomb.Stderr)
	}
	time.Sleep(2500 * time.Millisecond) // the bomb's sleeps end
	if out := run("echo alive").Stdout; out != "alive\n" {
		t.Fatalf("after the fork bomb: %q", out)
	}
	select {
	case <-accepted:
		t.Fatal("the host listener accepted a connection from the sandbox")
	default:
	}
}

func atoi(s string) int {
	n := 0
	for _, c := range strings.TrimSpace(s) {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int(c-'0')
	}
	return n
}
