package agentconn

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	agentv1 "github.com/warrenhq/warren/api/gen/warren/agent/v1"
	"github.com/warrenhq/warren/internal/testutil"
)

// TestAgentAsPID1 runs the agent as init of a fresh pid namespace, as in a
// sandbox, and checks that orphans left by commands are reaped.
func TestAgentAsPID1(t *testing.T) {
	testutil.RequireRoot(t)
	unshare := testutil.RequireBinary(t, "unshare")
	dir := t.TempDir()
	sock := filepath.Join(dir, "agent.sock")
	c := listen(t, sock)
	logs := &testutil.SyncBuffer{}
	// --kill-child: the namespace's init dies with unshare, and every
	// process in the namespace with it, however the test ends.
	cmd := exec.Command(unshare, "--pid", "--fork", "--mount-proc", "--kill-child=SIGKILL",
		agentBin, "--socket", sock, "--workspace", filepath.Join(dir, "ws"))
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
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	r := execute(t, c.Process(), &agentv1.ExecRequest{Argv: []string{"cat", "/proc/1/comm"}})
	if strings.TrimSpace(r.stdout.String()) != "warren-agent" {
		t.Fatalf("PID 1 is %q", r.stdout.String())
	}
	// Each subshell exits at once, orphaning its sleep to PID 1.
	execute(t, c.Process(), &agentv1.ExecRequest{ShellCommand: "for i in 1 2 3 4 5 6 7 8 9 10; do (sleep 0.05 &); done"})
	deadline := time.Now().Add(5 * time.Second)
	for {
		r = execute(t, c.Process(), &agentv1.ExecRequest{ShellCommand: "grep -l '^State:.*zombie' /proc/[0-9]*/status 2>/dev/null | wc -l; cat /proc/[0-9]*/comm 2>/dev/null | grep -c '^sleep$'"})
		f := strings.Fields(r.stdout.String())
		if len(f) == 2 && f[0] == "0" && f[1] == "0" {
			break // every sleep ran, exited and was reaped
		}
		if time.Now().After(deadline) {
			t.Fatalf("orphans not reaped: zombies, sleeps = %v", f)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
