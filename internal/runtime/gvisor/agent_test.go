package gvisor

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"connectrpc.com/connect"

	agentv1 "github.com/warrenhq/warren/api/gen/warren/agent/v1"
	"github.com/warrenhq/warren/internal/agentconn"
	rt "github.com/warrenhq/warren/internal/runtime"
	"github.com/warrenhq/warren/internal/runtime/runtimetest"
)

// buildAgent builds warren-agent from this tree into dir.
func buildAgent(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	out := filepath.Join(t.TempDir(), "warren-agent")
	cmd := exec.Command("go", "build", "-buildvcs=false", "-o", out, "./cmd/warren-agent")
	cmd.Dir = filepath.Join(filepath.Dir(file), "..", "..", "..", "agent")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build warren-agent: %v\n%s", err, msg)
	}
	return out
}

// The real agent runs as PID 1 in gVisor and reaches the daemon through its
// socket directory: commands run through it, it stays connected across a
// pause, and it dials back in when the daemon's listener is replaced (a
// daemon restart).
func TestAgentInGVisor(t *testing.T) {
	r := newTestRuntime(t)(t)
	agent := buildAgent(t)
	sockDir := t.TempDir()
	sock := filepath.Join(sockDir, "agent.sock")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx := context.Background()

	listen := func() *agentconn.Conn {
		t.Helper()
		c, err := agentconn.Listen(ctx, sock, log)
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := c.WaitReady(wctx); err != nil {
			c.Close()
			t.Fatalf("agent did not connect: %v", err)
		}
		return c
	}
	run := func(c *agentconn.Conn, script string) string {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		st, err := c.Process().Exec(cctx, connect.NewRequest(&agentv1.ExecRequest{Argv: []string{"/bin/sh", "-c", script}, User: "root"}))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		var out bytes.Buffer
		for st.Receive() {
			if o, ok := st.Msg().Event.(*agentv1.ExecEvent_Output); ok {
				out.Write(o.Output.Data)
			}
		}
		if err := st.Err(); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}

	conn, err := agentconn.Listen(ctx, sock, log)
	if err != nil {
		t.Fatal(err)
	}
	spec, results := runtimetest.NewSpec(t, runtimetest.BusyboxRootfs(t), []string{"/.warren/bin/warren-agent", "--socket", "/.warren/run/agent.sock"})
	spec.Mounts = append(spec.Mounts,
		rt.Mount{Source: agent, Destination: "/.warren/bin/warren-agent", ReadOnly: true},
		rt.Mount{Source: sockDir, Destination: "/.warren/run", ReadOnly: true})
	b := runtimetest.StartBox(t, r, spec, results)
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	if err := conn.WaitReady(wctx); err != nil {
		t.Fatalf("agent did not connect: %v; log:\n%s", err, b.ReadLog())
	}
	cancel()
	if got := run(conn, "uname -r; echo $$"); !bytes.Contains([]byte(got), []byte("gvisor")) {
		t.Errorf("uname through the agent = %q; want gVisor's kernel", got)
	}

	if err := r.Pause(ctx, spec.ID); err != nil {
		t.Fatal(err)
	}
	if err := r.Resume(ctx, spec.ID); err != nil {
		t.Fatal(err)
	}
	if got := run(conn, "echo after-resume"); got != "after-resume\n" {
		t.Errorf("after resume: %q", got)
	}

	// The daemon restarts: its listener and connection go away, a new one
	// listens on the same path, and the agent dials back in.
	conn.Close()
	conn = listen()
	defer conn.Close()
	if got := run(conn, "echo reconnected"); got != "reconnected\n" {
		t.Errorf("after reconnect: %q", got)
	}

	// Hibernation: a process the agent started keeps its memory across a
	// stopping checkpoint and a restore, and the restored agent dials in on
	// the same listener.
	// The counter is renamed into place: a read never sees the file between
	// its truncation and its write (a CI run read it empty once).
	run(conn, "(i=0; while :; do i=$((i+1)); echo $i > /tmp/n.new; mv /tmp/n.new /tmp/n; sleep 0.05; done) >/dev/null 2>&1 &")
	time.Sleep(300 * time.Millisecond)
	img := filepath.Join(t.TempDir(), "img")
	if _, err := r.Checkpoint(ctx, spec.ID, img, true); err != nil {
		t.Fatal(err)
	}
	if err := r.Destroy(ctx, spec.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Restore(ctx, spec, img); err != nil {
		t.Fatal(err)
	}
	wctx, cancel = context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := conn.WaitReady(wctx); err != nil {
		t.Fatalf("agent did not reconnect after restore: %v", err)
	}
	got := run(conn, "a=$(cat /tmp/n); sleep 0.3; b=$(cat /tmp/n); echo $a $b")
	var a, b2 int
	if _, err := fmt.Sscan(got, &a, &b2); err != nil || a < 3 || b2 <= a {
		t.Errorf("counter after restore: %q (want it past 3 and moving)", got)
	}
}
