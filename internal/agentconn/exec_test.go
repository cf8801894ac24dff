package agentconn

import (
	"bytes"
	"context"
	"os/user"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	agentv1 "github.com/warrenhq/warren/api/gen/warren/agent/v1"
	"github.com/warrenhq/warren/api/gen/warren/agent/v1/agentv1connect"
	"github.com/warrenhq/warren/internal/testutil"
)

type execResult struct {
	pid            int32
	stdout, stderr bytes.Buffer
	exited         *agentv1.Exited
}

func execute(t testing.TB, pc agentv1connect.ProcessServiceClient, req *agentv1.ExecRequest) *execResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := pc.Exec(ctx, connect.NewRequest(req))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r := &execResult{}
	for st.Receive() {
		switch e := st.Msg().Event.(type) {
		case *agentv1.ExecEvent_Started:
			r.pid = e.Started.Pid
		case *agentv1.ExecEvent_Output:
			if e.Output.Stream == agentv1.Stream_STREAM_STDERR {
				r.stderr.Write(e.Output.Data)
			} else {
				r.stdout.Write(e.Output.Data)
			}
		case *agentv1.ExecEvent_Exited:
			r.exited = e.Exited
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if r.exited == nil {
		t.Fatal("stream ended without exited")
	}
	return r
}

func TestExec(t *testing.T) {
	testutil.RequireRoot(t)
	c, _, ws := setup(t)
	pc := c.Process()

	r := execute(t, pc, &agentv1.ExecRequest{Argv: []string{"echo", "hello"}})
	if r.pid <= 0 || r.stdout.String() != "hello\n" || r.exited.ExitCode != 0 {
		t.Fatalf("echo: pid=%d out=%q %v", r.pid, r.stdout.String(), r.exited)
	}
	r = execute(t, pc, &agentv1.ExecRequest{Argv: []string{"sh", "-c", "echo err >&2; exit 42"}})
	if r.exited.ExitCode != 42 || r.stderr.String() != "err\n" {
		t.Fatalf("exit code: %q %v", r.stderr.String(), r.exited)
	}
	r = execute(t, pc, &agentv1.ExecRequest{Argv: []string{"wc", "-c"}, Stdin: bytes.Repeat([]byte("x"), 200000)})
	if strings.TrimSpace(r.stdout.String()) != "200000" {
		t.Fatalf("stdin: %q", r.stdout.String())
	}
	r = execute(t, pc, &agentv1.ExecRequest{Argv: []string{"sh", "-c", "echo $GREETING $HOME; pwd"}, Env: map[string]string{"GREETING": "hi"}})
	if r.stdout.String() != "hi /root\n"+ws+"\n" {
		t.Fatalf("env/cwd: %q", r.stdout.String())
	}
	r = execute(t, pc, &agentv1.ExecRequest{Argv: []string{"pwd"}, Cwd: "/tmp"})
	if r.stdout.String() != "/tmp\n" {
		t.Fatalf("cwd: %q", r.stdout.String())
	}
	r = execute(t, pc, &agentv1.ExecRequest{Argv: []string{"pwd"}, Cwd: "/no/such/dir"})
	if r.exited.Error == "" || r.exited.ExitCode != -1 {
		t.Fatalf("missing cwd: %v", r.exited)
	}
	r = execute(t, pc, &agentv1.ExecRequest{ShellCommand: "for i in 1 2 3; do echo $i; done | wc -l"})
	if strings.TrimSpace(r.stdout.String()) != "3" {
		t.Fatalf("shell_command: %q %v", r.stdout.String(), r.exited)
	}

	start := time.Now()
	r = execute(t, pc, &agentv1.ExecRequest{Argv: []string{"sleep", "30"}, TimeoutMs: 150})
	if !r.exited.TimedOut || r.exited.ExitCode != 137 || time.Since(start) > 5*time.Second {
		t.Fatalf("timeout: %v after %v", r.exited, time.Since(start))
	}

	const limit = 1 << 20
	r = execute(t, pc, &agentv1.ExecRequest{Argv: []string{"head", "-c", "10000000", "/dev/urandom"}, OutputLimitBytes: limit})
	if got := r.stdout.Len() + r.stderr.Len(); !r.exited.OutputTruncated || got > limit || r.exited.ExitCode != 0 {
		t.Fatalf("output cap: received %d bytes, %v", got, r.exited)
	}
}

func TestExecAsUser(t *testing.T) {
	testutil.RequireRoot(t)
	c, _, _ := setup(t)
	name := "1000" // a numeric uid works without a passwd entry
	if u, err := user.LookupId("1000"); err == nil {
		name = u.Username
	}
	r := execute(t, c.Process(), &agentv1.ExecRequest{Argv: []string{"id", "-u"}, User: name, Cwd: "/"})
	if strings.TrimSpace(r.stdout.String()) != "1000" {
		t.Fatalf("as %s: %q %v", name, r.stdout.String(), r.exited)
	}
	r = execute(t, c.Process(), &agentv1.ExecRequest{ShellCommand: "echo $USER $HOME", User: name, Cwd: "/"})
	if !strings.HasPrefix(r.stdout.String(), name+" ") {
		t.Fatalf("env as %s: %q %v", name, r.stdout.String(), r.exited)
	}
}

func TestConcurrentExecs(t *testing.T) {
	testutil.RequireRoot(t)
	c, _, _ := setup(t)
	const n = 40
	errs := make(chan string, n)
	for i := 0; i < n; i++ {
		go func() {
			r := execute(t, c.Process(), &agentv1.ExecRequest{Argv: []string{"sh", "-c", "sleep 0.2; echo done"}})
			errs <- r.stdout.String()
		}()
	}
	start := time.Now()
	for i := 0; i < n; i++ {
		if got := <-errs; got != "done\n" {
			t.Fatalf("exec %d: %q", i, got)
		}
	}
	// They ran side by side over the one connection, not one after another.
	if d := time.Since(start); d > 4*time.Second {
		t.Fatalf("%d concurrent 0.2 s commands took %v", n, d)
	}
}
