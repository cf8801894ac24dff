package agentconn

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	agentv1 "github.com/warrenhq/warren/api/gen/warren/agent/v1"
	"github.com/warrenhq/warren/internal/testutil"
)

// TestSIGTERMStopsCommandsThenAgent checks that a SIGTERM to the agent is
// passed on to the commands it runs before it exits.
func TestSIGTERMStopsCommandsThenAgent(t *testing.T) {
	testutil.RequireRoot(t)
	dir := t.TempDir()
	sock := filepath.Join(dir, "agent.sock")
	c := listen(t, sock)
	agent := startAgent(t, sock, filepath.Join(dir, "ws"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := c.Process().Exec(ctx, connect.NewRequest(&agentv1.ExecRequest{Argv: []string{"sleep", "30"}}))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if !st.Receive() || st.Msg().GetStarted() == nil {
		t.Fatalf("no started event: %v", st.Err())
	}
	pid := int(st.Msg().GetStarted().GetPid())
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })

	if err := agent.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var exited *agentv1.Exited
	for st.Receive() {
		if e := st.Msg().GetExited(); e != nil {
			exited = e
		}
	}
	if exited == nil || exited.ExitCode != 128+int32(syscall.SIGTERM) {
		t.Fatalf("command not ended by the forwarded SIGTERM: %v %v", exited, st.Err())
	}
	done := make(chan error, 1)
	go func() { _, err := agent.Process.Wait(); done <- err }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("agent still running 5 s after SIGTERM")
	}
}
