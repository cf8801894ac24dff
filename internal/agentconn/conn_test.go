package agentconn

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	agentv1 "github.com/warrenhq/warren/api/gen/warren/agent/v1"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/testutil"
)

func TestReconnectAfterDaemonRestart(t *testing.T) {
	testutil.RequireRoot(t)
	c, sock, _ := setup(t)

	// A process that outlives the daemon's connection.
	r := execute(t, c.Process(), &agentv1.ExecRequest{ShellCommand: "sleep 300 >/dev/null 2>&1 </dev/null & echo $!"})
	pid, err := strconv.Atoi(strings.TrimSpace(r.stdout.String()))
	if err != nil || pid <= 0 {
		t.Fatalf("background pid: %q %v", r.stdout.String(), err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })

	// The daemon goes away.
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Fatalf("socket file left after Close: %v", err)
	}
	if c.Connected() {
		t.Fatal("closed Conn says it is connected")
	}
	time.Sleep(100 * time.Millisecond) // let the agent notice and start re-dialing

	// A new daemon listens on the same path; the agent comes back.
	c2 := listen(t, sock)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	if err := c2.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("agent back after %v", time.Since(start))
	if !c2.Connected() {
		t.Fatal("not connected after WaitReady")
	}
	r = execute(t, c2.Process(), &agentv1.ExecRequest{Argv: []string{"kill", "-0", strconv.Itoa(pid)}})
	if r.exited.ExitCode != 0 {
		t.Fatalf("process started before the restart is gone: %v %q", r.exited, r.stderr.String())
	}
}

func TestNoAgent(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "agent.sock")
	c := listen(t, sock)
	fi, err := os.Stat(sock)
	if err != nil || fi.Mode().Perm() != 0o600 || fi.Mode().Type() != os.ModeSocket {
		t.Fatalf("socket: %v %v", fi, err)
	}
	if c.Connected() {
		t.Fatal("connected without an agent")
	}
	_, err = c.Process().Ping(context.Background(), connect.NewRequest(&agentv1.PingRequest{}))
	if connect.CodeOf(err) != connect.CodeUnavailable {
		t.Fatalf("ping without agent: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := c.WaitReady(ctx); !errdefs.IsUnavailable(err) {
		t.Fatalf("WaitReady without agent: %v", err)
	}
}

func TestListenRefusesNonSocket(t *testing.T) {
	p := filepath.Join(t.TempDir(), "agent.sock")
	if err := os.WriteFile(p, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(context.Background(), p, nil); !errdefs.IsConflict(err) {
		t.Fatalf("want a conflict, got %v", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "precious" {
		t.Fatal("Listen clobbered a regular file")
	}
	long := "/tmp/" + strings.Repeat("x", 120)
	if _, err := Listen(context.Background(), long, nil); !errdefs.IsInvalid(err) {
		t.Fatalf("long path: %v", err)
	}
}

func TestStaleSocketIsReplaced(t *testing.T) {
	testutil.RequireRoot(t)
	c, sock, _ := setup(t)
	// A daemon that died without cleaning up leaves its socket file behind.
	c.ln.Close()
	if _, err := os.Lstat(sock); err != nil {
		t.Fatalf("expected a stale socket: %v", err)
	}
	c2 := listen(t, sock)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The agent still talks to the dead daemon's conn until it drops it.
	c.Close()
	if err := c2.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
}

// Only root may hold the agent link: the socket is 0600, and a peer that
// is not root (were the mode ever wider) is refused on accept, so a
// sandbox's unprivileged processes cannot take over the daemon's commands.
func TestNonRootPeerRefused(t *testing.T) {
	testutil.RequireRoot(t)
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sock := filepath.Join(dir, "agent.sock")
	c := listen(t, sock)
	// Past the mode: the check on accept must hold by itself.
	if err := os.Chmod(sock, 0o666); err != nil {
		t.Fatal(err)
	}
	// A copy nobody may run (the package's build dir is private).
	bin := filepath.Join(dir, "warren-agent")
	data, err := os.ReadFile(agentBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	logs := &testutil.SyncBuffer{}
	nobody := exec.Command(bin, "--socket", sock, "--workspace", filepath.Join(dir, "ws"))
	nobody.Stdout, nobody.Stderr = logs, logs
	nobody.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if err := nobody.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nobody.Process.Kill(); _ = nobody.Wait() })
	// The agent dials every 20–200 ms; give it a dozen tries.
	time.Sleep(2 * time.Second)
	if c.Connected() {
		t.Fatalf("an agent running as uid 65534 was adopted; its log:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "connected to daemon") {
		t.Logf("(the unprivileged agent never saw its connection accepted, as expected)")
	}
	// Root still gets in.
	startAgent(t, sock, filepath.Join(dir, "ws2"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatalf("the root agent did not connect: %v", err)
	}
}
