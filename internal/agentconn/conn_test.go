package agentconn

import (
	"context"
	"os"
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
	if err != nil || fi.Mode().Perm() != 0o666 || fi.Mode().Type() != os.ModeSocket {
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
