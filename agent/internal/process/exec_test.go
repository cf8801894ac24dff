package process

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/agent/internal/agenttest"
	"github.com/warrenhq/warren/agent/internal/initproc"
	"github.com/warrenhq/warren/agent/internal/reaper"
	agentv1 "github.com/warrenhq/warren/api/gen/warren/agent/v1"
	"github.com/warrenhq/warren/api/gen/warren/agent/v1/agentv1connect"
)

func TestMain(m *testing.M) {
	// Like the agent, collect orphans of the commands the tests start.
	if err := initproc.BecomeReaper(); err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go testReaper.Run(ctx)
	code := m.Run()
	cancel()
	os.Exit(code)
}

var testReaper = reaper.New(nil)

type result struct {
	started *agentv1.Started
	stdout  bytes.Buffer
	stderr  bytes.Buffer
	exited  *agentv1.Exited
	events  int
}

func newClient(t testing.TB) (agentv1connect.ProcessServiceClient, string) {
	t.Helper()
	ws := t.TempDir()
	svc := New(Config{Workspace: ws, Users: agenttest.Users(t), Version: "test"}, testReaper)
	mux := http.NewServeMux()
	svc.Handle(mux, connect.WithCompression("gzip", nil, nil))
	hc, url := agenttest.Serve(t, mux)
	return agentv1connect.NewProcessServiceClient(hc, url), ws
}

func run(t *testing.T, c agentv1connect.ProcessServiceClient, req *agentv1.ExecRequest) *result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := c.Exec(ctx, connect.NewRequest(req))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r := &result{}
	for st.Receive() {
		ev := st.Msg()
		r.events++
		if r.exited != nil {
			t.Fatalf("event after exited: %v", ev)
		}
		switch e := ev.Event.(type) {
		case *agentv1.ExecEvent_Started:
			if r.events != 1 {
				t.Fatalf("started is event %d", r.events)
			}
			r.started = e.Started
		case *agentv1.ExecEvent_Output:
			if len(e.Output.Data) > chunkSize {
				t.Fatalf("chunk of %d bytes", len(e.Output.Data))
			}
			if e.Output.Stream == agentv1.Stream_STREAM_STDOUT {
				r.stdout.Write(e.Output.Data)
			} else {
				r.stderr.Write(e.Output.Data)
			}
		case *agentv1.ExecEvent_Exited:
			r.exited = e.Exited
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if r.exited == nil {
		t.Fatal("no exited event")
	}
	return r
}

func TestEchoExitCodeStderr(t *testing.T) {
	c, _ := newClient(t)
	r := run(t, c, &agentv1.ExecRequest{Argv: []string{"echo", "hello"}})
	if r.started == nil || r.started.Pid <= 0 || r.stdout.String() != "hello\n" || r.exited.ExitCode != 0 {
		t.Fatalf("echo: started=%v stdout=%q exited=%v", r.started, r.stdout.String(), r.exited)
	}
	r = run(t, c, &agentv1.ExecRequest{Argv: []string{"sh", "-c", "echo oops >&2; exit 3"}})
	if r.exited.ExitCode != 3 || r.stderr.String() != "oops\n" || r.stdout.Len() != 0 {
		t.Fatalf("exit 3: stderr=%q exited=%v", r.stderr.String(), r.exited)
	}
}

func TestStdinEnvCwd(t *testing.T) {
	c, ws := newClient(t)
	r := run(t, c, &agentv1.ExecRequest{Argv: []string{"cat"}, Stdin: []byte("from stdin")})
	if r.stdout.String() != "from stdin" {
		t.Fatalf("stdin: %q", r.stdout.String())
	}
	r = run(t, c, &agentv1.ExecRequest{Argv: []string{"sh", "-c", "echo $TERM $LANG $FOO; pwd"}, Env: map[string]string{"FOO": "bar"}})
	if got := r.stdout.String(); got != "xterm C.UTF-8 bar\n"+ws+"\n" {
		t.Fatalf("env/cwd: %q", got)
	}
	if err := os.Mkdir(filepath.Join(ws, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	r = run(t, c, &agentv1.ExecRequest{Argv: []string{"pwd"}, Cwd: "sub"})
	if got := r.stdout.String(); got != filepath.Join(ws, "sub")+"\n" {
		t.Fatalf("relative cwd: %q", got)
	}
	r = run(t, c, &agentv1.ExecRequest{Argv: []string{"pwd"}, Cwd: "/does/not/exist"})
	if r.started != nil || r.exited.ExitCode != -1 || !strings.Contains(r.exited.Error, "/does/not/exist") {
		t.Fatalf("missing cwd: %v", r.exited)
	}
}

func TestShellCommandAndErrors(t *testing.T) {
	c, _ := newClient(t)
	r := run(t, c, &agentv1.ExecRequest{ShellCommand: "echo abc | tr a-c x-z; exit 4"})
	if r.stdout.String() != "xyz\n" || r.exited.ExitCode != 4 {
		t.Fatalf("shell: %q %v", r.stdout.String(), r.exited)
	}
	r = run(t, c, &agentv1.ExecRequest{Argv: []string{"no-such-program-here"}})
	if r.exited.ExitCode != -1 || !strings.Contains(r.exited.Error, "not found") {
		t.Fatalf("missing program: %v", r.exited)
	}
	r = run(t, c, &agentv1.ExecRequest{Argv: []string{"true"}, User: "no-such-user"})
	if r.exited.ExitCode != -1 || !strings.Contains(r.exited.Error, "no-such-user") {
		t.Fatalf("unknown user: %v", r.exited)
	}
	_, err := collectErr(c, &agentv1.ExecRequest{Argv: []string{"true"}, ShellCommand: "true"})
	if connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("argv and shell_command: want InvalidArgument, got %v", err)
	}
}

func collectErr(c agentv1connect.ProcessServiceClient, req *agentv1.ExecRequest) (int, error) {
	st, err := c.Exec(context.Background(), connect.NewRequest(req))
	if err != nil {
		return 0, err
	}
	defer st.Close()
	n := 0
	for st.Receive() {
		n++
	}
	return n, st.Err()
}

func TestTimeoutKillsGroup(t *testing.T) {
	c, _ := newClient(t)
	start := time.Now()
	r := run(t, c, &agentv1.ExecRequest{ShellCommand: "sleep 30 & sleep 30", TimeoutMs: 200})
	if !r.exited.TimedOut || r.exited.ExitCode != 128+int32(syscall.SIGKILL) || r.exited.Signal != "killed" {
		t.Fatalf("timeout: %v", r.exited)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("timeout took %v", d)
	}
}

func TestOutputCap(t *testing.T) {
	c, _ := newClient(t)
	const limit = 1 << 20
	r := run(t, c, &agentv1.ExecRequest{Argv: []string{"head", "-c", "10000000", "/dev/zero"}, OutputLimitBytes: limit})
	if !r.exited.OutputTruncated || r.exited.ExitCode != 0 {
		t.Fatalf("cap: %v", r.exited)
	}
	if got := r.stdout.Len() + r.stderr.Len(); got != limit {
		t.Fatalf("received %d bytes, want exactly the %d cap", got, limit)
	}
	r = run(t, c, &agentv1.ExecRequest{Argv: []string{"head", "-c", "300000", "/dev/zero"}})
	if r.exited.OutputTruncated || r.stdout.Len() != 300000 {
		t.Fatalf("uncapped: %d bytes, %v", r.stdout.Len(), r.exited)
	}
}

func TestClientGoneKillsGroup(t *testing.T) {
	c, _ := newClient(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := c.Exec(ctx, connect.NewRequest(&agentv1.ExecRequest{ShellCommand: "sleep 60 & echo $!; wait"}))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var pid int
	for pid == 0 && st.Receive() {
		if o := st.Msg().GetOutput(); o != nil {
			pid, _ = strconv.Atoi(strings.TrimSpace(string(o.Data)))
		}
	}
	if pid <= 0 {
		t.Fatalf("no pid printed: %v", st.Err())
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	cancel()
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("background sleep %d survived its client going away", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestLookPath(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tool"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if p, err := lookPath("tool", "/nonexistent:"+dir, "/"); err != nil || p != filepath.Join(dir, "tool") {
		t.Fatalf("lookPath tool: %q %v", p, err)
	}
	if _, err := lookPath("data", dir, "/"); !errors.Is(err, errNotFound) {
		t.Fatalf("non-executable found: %v", err)
	}
	if p, err := lookPath("./tool", "", dir); err != nil || p != "./tool" {
		t.Fatalf("relative: %q %v", p, err)
	}
}

func TestSetEnvReplacesTheSandboxEnvironment(t *testing.T) {
	c, _ := newClient(t)
	t.Cleanup(func() { initproc.SetSandboxEnv(nil) })
	ctx := context.Background()
	if _, err := c.SetEnv(ctx, connect.NewRequest(&agentv1.SetEnvRequest{Env: map[string]string{"TEAM": "blue", "LANG": "de_DE.UTF-8"}})); err != nil {
		t.Fatal(err)
	}
	r := run(t, c, &agentv1.ExecRequest{Argv: []string{"sh", "-c", "echo $TEAM $LANG $OWN"}, Env: map[string]string{"OWN": "mine"}})
	if got := r.stdout.String(); got != "blue de_DE.UTF-8 mine\n" {
		t.Fatalf("after SetEnv: %q", got)
	}
	// A command's own variables win over the sandbox's.
	r = run(t, c, &agentv1.ExecRequest{Argv: []string{"sh", "-c", "echo $TEAM"}, Env: map[string]string{"TEAM": "red"}})
	if got := r.stdout.String(); got != "red\n" {
		t.Fatalf("override: %q", got)
	}
	// Replaced, not merged.
	if _, err := c.SetEnv(ctx, connect.NewRequest(&agentv1.SetEnvRequest{Env: map[string]string{"OTHER": "1"}})); err != nil {
		t.Fatal(err)
	}
	r = run(t, c, &agentv1.ExecRequest{Argv: []string{"sh", "-c", "echo ${TEAM:-unset} $OTHER"}})
	if got := r.stdout.String(); got != "unset 1\n" {
		t.Fatalf("after a second SetEnv: %q", got)
	}
	for _, bad := range []map[string]string{{"": "x"}, {"A=B": "x"}, {"A": "x\x00y"}} {
		if _, err := c.SetEnv(ctx, connect.NewRequest(&agentv1.SetEnvRequest{Env: bad})); connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Fatalf("SetEnv(%q): %v", bad, err)
		}
	}
}
