package agentconn

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/testutil"
)

// agentBin is the warren-agent binary built once for the package's tests.
var agentBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "warren-agent-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	agentBin = filepath.Join(dir, "warren-agent")
	build := exec.Command("go", "build", "-buildvcs=false", "-o", agentBin, "./cmd/warren-agent")
	build.Dir = filepath.Join("..", "..", "agent")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build warren-agent: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// startAgent runs warren-agent as a normal child (not PID 1: it becomes a
// child subreaper) dialing sock, and kills it, by pid, when the test ends.
func startAgent(t testing.TB, sock, workspace string) *exec.Cmd {
	t.Helper()
	logs := &testutil.SyncBuffer{}
	cmd := exec.Command(agentBin, "--socket", sock, "--workspace", workspace)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("agent log:\n%s", logs.String())
		}
	})
	return cmd
}

// setup listens on a fresh socket, starts an agent against it and waits for
// it to answer.
func setup(t testing.TB) (c *Conn, sock, workspace string) {
	t.Helper()
	testutil.RequireRoot(t) // the daemon's end accepts only a root agent
	dir := t.TempDir()
	sock = filepath.Join(dir, "agent.sock")
	workspace = filepath.Join(dir, "workspace")
	c = listen(t, sock)
	startAgent(t, sock, workspace)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return c, sock, workspace
}

func listen(t testing.TB, sock string) *Conn {
	t.Helper()
	c, err := Listen(context.Background(), sock, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
