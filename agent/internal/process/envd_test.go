package process

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/agent/internal/agenttest"
	"github.com/warrenhq/warren/agent/internal/users"
	"github.com/warrenhq/warren/api/gen/process"
	"github.com/warrenhq/warren/api/gen/process/processconnect"
	agentv1 "github.com/warrenhq/warren/api/gen/warren/agent/v1"
	"github.com/warrenhq/warren/api/gen/warren/agent/v1/agentv1connect"
)

// envdEnv is one agent process service reachable both ways the daemon and
// E2B's SDK may speak to it.
type envdEnv struct {
	svc  *Service
	url  string
	home string // the default user's home
	h1   *http.Client
	h2   *http.Client
}

// transports are the HTTP versions every client-facing test runs over: the
// SDK speaks HTTP/1.1, the daemon's link HTTP/2.
var transports = []string{"http1", "h2c"}

func newEnvdEnv(t testing.TB, db users.DB) *envdEnv {
	t.Helper()
	svc := New(Config{Workspace: t.TempDir(), Users: db, Version: "test"}, testReaper)
	mux := http.NewServeMux()
	opts := []connect.HandlerOption{connect.WithReadMaxBytes(64 << 20), connect.WithCompression("gzip", nil, nil)}
	svc.Handle(mux, opts...)
	svc.HandleEnvd(mux, opts...)
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(srv.Close)
	h1 := &http.Transport{}
	h2 := &http.Transport{Protocols: new(http.Protocols)}
	h2.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(h1.CloseIdleConnections)
	t.Cleanup(h2.CloseIdleConnections)
	u, err := db.Lookup("")
	if err != nil {
		t.Fatal(err)
	}
	e := &envdEnv{svc: svc, url: srv.URL, home: u.Home, h1: &http.Client{Transport: h1}, h2: &http.Client{Transport: h2}}
	t.Cleanup(func() { e.killAll() })
	return e
}

// killAll kills every process the test left running.
func (e *envdEnv) killAll() {
	for _, p := range e.svc.reg.running() {
		_ = syscallKill(p.pid)
	}
}

func syscallKill(pid int) error { return syscall.Kill(-pid, syscall.SIGKILL) }

func (e *envdEnv) client(transport string) processconnect.ProcessClient {
	hc := e.h1
	if transport == "h2c" {
		hc = e.h2
	}
	return processconnect.NewProcessClient(hc, e.url, connect.WithProtoJSON())
}

func (e *envdEnv) warren() agentv1connect.ProcessServiceClient {
	return agentv1connect.NewProcessServiceClient(e.h2, e.url)
}

func bashReq(cmd string) *process.StartRequest {
	f := false
	return &process.StartRequest{Process: &process.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-l", "-c", cmd}}, Stdin: &f}
}

func shReq(cmd string) *process.StartRequest {
	f := false
	return &process.StartRequest{Process: &process.ProcessConfig{Cmd: "/bin/sh", Args: []string{"-c", cmd}}, Stdin: &f}
}

func asUser(req *connect.Request[process.StartRequest], name string) *connect.Request[process.StartRequest] {
	req.Header().Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(name+":")))
	return req
}

// envdRun is what one Start or Connect stream said.
type envdRun struct {
	pid                 uint32
	stdout, stderr, pty bytes.Buffer
	keepalives          int
	end                 *process.ProcessEvent_EndEvent
}

// eventStream is the part of Start's and Connect's client streams the
// tests read.
type eventStream interface {
	Receive() bool
	Err() error
	Close() error
}

func eventOf(st eventStream) *process.ProcessEvent {
	switch s := st.(type) {
	case *connect.ServerStreamForClient[process.StartResponse]:
		return s.Msg().GetEvent()
	case *connect.ServerStreamForClient[process.ConnectResponse]:
		return s.Msg().GetEvent()
	}
	panic("unknown stream")
}

// follower reads a stream in the background, so a test can act on the
// process between events.
type follower struct {
	t      *testing.T
	cancel context.CancelFunc
	events chan *process.ProcessEvent
	done   chan struct{}
	err    error
	got    envdRun
}

func follow(t *testing.T, open func(ctx context.Context) (eventStream, error)) *follower {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	st, err := open(ctx)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	f := &follower{t: t, cancel: cancel, events: make(chan *process.ProcessEvent, 1024), done: make(chan struct{})}
	go func() {
		defer close(f.done)
		defer close(f.events)
		defer st.Close()
		for st.Receive() {
			f.events <- eventOf(st)
		}
		f.err = st.Err()
	}()
	t.Cleanup(func() {
		cancel()
		<-f.done
	})
	return f
}

func startStream(c processconnect.ProcessClient, req *connect.Request[process.StartRequest]) func(ctx context.Context) (eventStream, error) {
	return func(ctx context.Context) (eventStream, error) { return c.Start(ctx, req) }
}

func connectStream(c processconnect.ProcessClient, sel *process.ProcessSelector) func(ctx context.Context) (eventStream, error) {
	return func(ctx context.Context) (eventStream, error) {
		return c.Connect(ctx, connect.NewRequest(&process.ConnectRequest{Process: sel}))
	}
}

// next takes one event, checking the stream's invariants: start first,
// nothing after end.
func (f *follower) next() (*process.ProcessEvent, bool) {
	f.t.Helper()
	ev, ok := <-f.events
	if !ok {
		return nil, false
	}
	if f.got.end != nil {
		f.t.Fatalf("event after end: %v", ev)
	}
	switch e := ev.GetEvent().(type) {
	case *process.ProcessEvent_Start:
		if f.got.pid != 0 {
			f.t.Fatalf("second start event: %v", ev)
		}
		f.got.pid = e.Start.GetPid()
	case *process.ProcessEvent_Data:
		if f.got.pid == 0 {
			f.t.Fatalf("data before start: %v", ev)
		}
		f.got.stdout.Write(e.Data.GetStdout())
		f.got.stderr.Write(e.Data.GetStderr())
		f.got.pty.Write(e.Data.GetPty())
	case *process.ProcessEvent_Keepalive:
		f.got.keepalives++
	case *process.ProcessEvent_End:
		if f.got.pid == 0 {
			f.t.Fatalf("end before start: %v", ev)
		}
		f.got.end = e.End
	default:
		f.t.Fatalf("unexpected event %v", ev)
	}
	return ev, true
}

// until reads events until cond holds; it fails if the stream ends first.
func (f *follower) until(what string, cond func(*envdRun) bool) {
	f.t.Helper()
	for !cond(&f.got) {
		if _, ok := f.next(); !ok {
			f.t.Fatalf("stream ended (err %v) before %s; got stdout %q stderr %q pty %q", f.err, what, f.got.stdout.String(), f.got.stderr.String(), f.got.pty.String())
		}
	}
}

// finish reads to the end of the stream and returns its error.
func (f *follower) finish() error {
	f.t.Helper()
	for {
		if _, ok := f.next(); !ok {
			return f.err
		}
	}
}

// mustEnd reads to the end and wants a clean end event.
func (f *follower) mustEnd() *envdRun {
	f.t.Helper()
	if err := f.finish(); err != nil {
		f.t.Fatalf("stream: %v (stdout %q stderr %q)", err, f.got.stdout.String(), f.got.stderr.String())
	}
	if f.got.end == nil {
		f.t.Fatal("stream ended without an end event")
	}
	return &f.got
}

func runEnvd(t *testing.T, c processconnect.ProcessClient, req *connect.Request[process.StartRequest]) *envdRun {
	t.Helper()
	return follow(t, startStream(c, req)).mustEnd()
}

func wantCode(t *testing.T, err error, code connect.Code) {
	t.Helper()
	if connect.CodeOf(err) != code {
		t.Fatalf("got error %v, want code %v", err, code)
	}
}

func pidSel(pid uint32) *process.ProcessSelector {
	return &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: pid}}
}

func tagSel(tag string) *process.ProcessSelector {
	return &process.ProcessSelector{Selector: &process.ProcessSelector_Tag{Tag: tag}}
}

func TestEnvdStartOutputAndEnd(t *testing.T) {
	e := newEnvdEnv(t, agenttest.Users(t))
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			c := e.client(tr)
			r := runEnvd(t, c, connect.NewRequest(bashReq("echo out; echo err >&2; exit 3")))
			if r.pid == 0 || r.stdout.String() != "out\n" || r.stderr.String() != "err\n" {
				t.Fatalf("pid %d stdout %q stderr %q", r.pid, r.stdout.String(), r.stderr.String())
			}
			if r.end.GetExitCode() != 3 || !r.end.GetExited() || r.end.GetStatus() != "exit status 3" || r.end.GetError() != "exit status 3" {
				t.Fatalf("end %v", r.end)
			}

			r = runEnvd(t, c, connect.NewRequest(bashReq("printf hi")))
			if r.stdout.String() != "hi" || r.end.GetExitCode() != 0 || !r.end.GetExited() || r.end.GetStatus() != "exit status 0" || r.end.Error != nil {
				t.Fatalf("stdout %q end %v", r.stdout.String(), r.end)
			}
		})
	}
}

func TestEnvdEnvCwd(t *testing.T) {
	e := newEnvdEnv(t, agenttest.Users(t))
	c := e.client("http1")
	if err := os.Mkdir(filepath.Join(e.home, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	const script = `pwd; echo "$HOME|$USER|$LOGNAME|$FOO|$TERM"`
	want := func(dir string) string { return dir + "\n" + e.home + "|user|user|bar|xterm\n" }
	abs := t.TempDir()
	for _, tc := range []struct{ cwd *string }{{nil}, {ptr("sub")}, {ptr("~/sub")}, {&abs}} {
		req := shReq(script)
		req.Process.Envs = map[string]string{"FOO": "bar"}
		req.Process.Cwd = tc.cwd
		r := runEnvd(t, c, connect.NewRequest(req))
		dir := e.home
		switch {
		case tc.cwd == nil:
		case *tc.cwd == abs:
			dir = abs
		default:
			dir = filepath.Join(e.home, "sub")
		}
		if r.stdout.String() != want(dir) || r.end.GetExitCode() != 0 {
			t.Fatalf("cwd %v: stdout %q, want %q (end %v)", tc.cwd, r.stdout.String(), want(dir), r.end)
		}
	}

	// A request's variables win over the defaults.
	req := shReq(`echo "$HOME $PATH"`)
	req.Process.Envs = map[string]string{"HOME": "/elsewhere", "PATH": "/bin:/usr/bin"}
	if r := runEnvd(t, c, connect.NewRequest(req)); r.stdout.String() != "/elsewhere /bin:/usr/bin\n" {
		t.Fatalf("overrides: %q", r.stdout.String())
	}

	req = shReq("true")
	req.Process.Cwd = ptr("/does/not/exist")
	err := follow(t, startStream(c, connect.NewRequest(req))).finish()
	wantCode(t, err, connect.CodeInvalidArgument)
}

func ptr[T any](v T) *T { return &v }

// TestEnvdUser runs as the default user and as root, chosen by the Basic
// Authorization header. It needs root to switch users.
func TestEnvdUser(t *testing.T) {
	agenttest.RequireRoot(t)
	home, err := os.MkdirTemp("", "envd-home-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	if err := os.Chmod(home, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	db := users.DB{PasswdPath: filepath.Join(dir, "passwd"), GroupPath: filepath.Join(dir, "group")}
	passwd := "root:x:0:0:root:/root:/bin/sh\nuser:x:65534:65534::" + home + ":/bin/bash\n"
	if err := os.WriteFile(db.PasswdPath, []byte(passwd), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(db.GroupPath, []byte("root:x:0:\nuser:x:65534:\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e := newEnvdEnv(t, db)
	c := e.client("http1")
	const script = `echo "$(id -u) $(id -g) $(pwd) $HOME $USER $SHELL"`

	r := runEnvd(t, c, connect.NewRequest(bashReq(script)))
	if want := "65534 65534 " + home + " " + home + " user /bin/bash\n"; r.stdout.String() != want {
		t.Fatalf("default user: %q, want %q (stderr %q)", r.stdout.String(), want, r.stderr.String())
	}
	r = runEnvd(t, c, asUser(connect.NewRequest(bashReq(script)), "root"))
	if want := "0 0 /root /root root /bin/sh\n"; r.stdout.String() != want {
		t.Fatalf("root: %q, want %q", r.stdout.String(), want)
	}
	r = runEnvd(t, c, asUser(connect.NewRequest(bashReq(script)), "user"))
	if !strings.HasPrefix(r.stdout.String(), "65534 ") {
		t.Fatalf("user: %q", r.stdout.String())
	}

	// A terminal belongs to the user it runs as.
	term := &process.StartRequest{
		Process: &process.ProcessConfig{Cmd: "/bin/sh", Args: []string{"-c", `echo "x$(id -u) $(stat -c %u "$(tty)")"`}},
		Pty:     &process.PTY{Size: &process.PTY_Size{Cols: 80, Rows: 24}},
	}
	r = runEnvd(t, c, connect.NewRequest(term))
	if !strings.Contains(r.pty.String(), "x65534 65534") || r.end.GetExitCode() != 0 {
		t.Fatalf("terminal as user: %q, end %v", r.pty.String(), r.end)
	}

	err = follow(t, startStream(c, asUser(connect.NewRequest(bashReq("true")), "nosuchuser"))).finish()
	wantCode(t, err, connect.CodeUnauthenticated)
	req := connect.NewRequest(bashReq("true"))
	req.Header().Set("Authorization", "Bearer abc")
	wantCode(t, follow(t, startStream(c, req)).finish(), connect.CodeUnauthenticated)
}

func TestEnvdStdin(t *testing.T) {
	e := newEnvdEnv(t, agenttest.Users(t))
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			c := e.client(tr)
			ctx := context.Background()

			// stdin: true keeps a pipe open for input, until CloseStdin.
			req := bashReq("cat")
			req.Stdin = ptr(true)
			f := follow(t, startStream(c, connect.NewRequest(req)))
			f.until("start", func(r *envdRun) bool { return r.pid != 0 })
			in := &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: []byte("hello\n")}}
			if _, err := c.SendInput(ctx, connect.NewRequest(&process.SendInputRequest{Process: pidSel(f.got.pid), Input: in})); err != nil {
				t.Fatal(err)
			}
			f.until("echo", func(r *envdRun) bool { return r.stdout.String() == "hello\n" })
			// Input for a terminal is refused: this process has none.
			tty := &process.ProcessInput{Input: &process.ProcessInput_Pty{Pty: []byte("x")}}
			_, err := c.SendInput(ctx, connect.NewRequest(&process.SendInputRequest{Process: pidSel(f.got.pid), Input: tty}))
			wantCode(t, err, connect.CodeFailedPrecondition)
			if _, err := c.CloseStdin(ctx, connect.NewRequest(&process.CloseStdinRequest{Process: pidSel(f.got.pid)})); err != nil {
				t.Fatal(err)
			}
			if r := f.mustEnd(); r.end.GetExitCode() != 0 || r.stdout.String() != "hello\n" {
				t.Fatalf("end %v stdout %q", r.end, r.stdout.String())
			}

			// stdin: false reads /dev/null: cat ends at once.
			if r := runEnvd(t, c, connect.NewRequest(bashReq("cat; echo done"))); r.stdout.String() != "done\n" {
				t.Fatalf("stdin false: %q", r.stdout.String())
			}
			// ...and input for it is refused.
			f = follow(t, startStream(c, connect.NewRequest(bashReq("sleep 30"))))
			f.until("start", func(r *envdRun) bool { return r.pid != 0 })
			_, err = c.SendInput(ctx, connect.NewRequest(&process.SendInputRequest{Process: pidSel(f.got.pid), Input: in}))
			wantCode(t, err, connect.CodeFailedPrecondition)
			kill(t, c, f.got.pid)
			f.mustEnd()

			// No stdin field at all: envd keeps a pipe, for older SDKs.
			req = bashReq("cat")
			req.Stdin = nil
			f = follow(t, startStream(c, connect.NewRequest(req)))
			f.until("start", func(r *envdRun) bool { return r.pid != 0 })
			if _, err := c.SendInput(ctx, connect.NewRequest(&process.SendInputRequest{Process: pidSel(f.got.pid), Input: in})); err != nil {
				t.Fatal(err)
			}
			f.until("echo", func(r *envdRun) bool { return r.stdout.String() == "hello\n" })
			if _, err := c.CloseStdin(ctx, connect.NewRequest(&process.CloseStdinRequest{Process: pidSel(f.got.pid)})); err != nil {
				t.Fatal(err)
			}
			f.mustEnd()
		})
	}
}

func kill(t *testing.T, c processconnect.ProcessClient, pid uint32) {
	t.Helper()
	req := &process.SendSignalRequest{Process: pidSel(pid), Signal: process.Signal_SIGNAL_SIGKILL}
	if _, err := c.SendSignal(context.Background(), connect.NewRequest(req)); err != nil {
		t.Fatal(err)
	}
}

func TestEnvdStreamInput(t *testing.T) {
	e := newEnvdEnv(t, agenttest.Users(t))
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			c := e.client(tr)
			req := bashReq("cat")
			req.Stdin = ptr(true)
			f := follow(t, startStream(c, connect.NewRequest(req)))
			f.until("start", func(r *envdRun) bool { return r.pid != 0 })

			st := c.StreamInput(context.Background())
			msgs := []*process.StreamInputRequest{
				{Event: &process.StreamInputRequest_Start{Start: &process.StreamInputRequest_StartEvent{Process: pidSel(f.got.pid)}}},
				{Event: &process.StreamInputRequest_Data{Data: &process.StreamInputRequest_DataEvent{Input: &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: []byte("a\n")}}}}},
				{Event: &process.StreamInputRequest_Keepalive{Keepalive: &process.StreamInputRequest_KeepAlive{}}},
				{Event: &process.StreamInputRequest_Data{Data: &process.StreamInputRequest_DataEvent{Input: &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: []byte("b\n")}}}}},
			}
			for _, m := range msgs {
				if err := st.Send(m); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := st.CloseAndReceive(); err != nil {
				t.Fatal(err)
			}
			f.until("input", func(r *envdRun) bool { return r.stdout.String() == "a\nb\n" })
			if _, err := c.CloseStdin(context.Background(), connect.NewRequest(&process.CloseStdinRequest{Process: pidSel(f.got.pid)})); err != nil {
				t.Fatal(err)
			}
			f.mustEnd()

			// Input before the start event names no process.
			st = c.StreamInput(context.Background())
			_ = st.Send(msgs[1])
			_, err := st.CloseAndReceive()
			wantCode(t, err, connect.CodeInvalidArgument)
		})
	}
}

// TestEnvdDisconnectAndConnect: a command outlives its Start stream, stays
// listed, and Connect (by pid or tag) follows its output from then on.
func TestEnvdDisconnectAndConnect(t *testing.T) {
	e := newEnvdEnv(t, agenttest.Users(t))
	for i, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			c := e.client(tr)
			ctx := context.Background()
			tag := "bg-" + strconv.Itoa(i)
			req := bashReq("echo before; cat")
			req.Stdin = ptr(true)
			req.Tag = &tag
			f := follow(t, startStream(c, connect.NewRequest(req)))
			f.until("first output", func(r *envdRun) bool { return r.stdout.String() == "before\n" })
			pid := f.got.pid
			f.cancel() // the client goes away
			if err := f.finish(); connect.CodeOf(err) != connect.CodeCanceled {
				t.Fatalf("cancelled stream: %v", err)
			}

			list, err := c.List(ctx, connect.NewRequest(&process.ListRequest{}))
			if err != nil {
				t.Fatal(err)
			}
			var found *process.ProcessInfo
			for _, p := range list.Msg.GetProcesses() {
				if p.GetPid() == pid {
					found = p
				}
			}
			if found == nil || found.GetTag() != tag || found.GetConfig().GetCmd() != "/bin/bash" {
				t.Fatalf("pid %d not listed as running: %v", pid, list.Msg)
			}

			byPid := follow(t, connectStream(c, pidSel(pid)))
			byTag := follow(t, connectStream(c, tagSel(tag)))
			byPid.until("start", func(r *envdRun) bool { return r.pid != 0 })
			byTag.until("start", func(r *envdRun) bool { return r.pid != 0 })
			if byPid.got.pid != pid || byTag.got.pid != pid {
				t.Fatalf("connect answered pids %d and %d, want %d", byPid.got.pid, byTag.got.pid, pid)
			}
			in := &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: []byte("after\n")}}
			if _, err := c.SendInput(ctx, connect.NewRequest(&process.SendInputRequest{Process: tagSel(tag), Input: in})); err != nil {
				t.Fatal(err)
			}
			for _, fl := range []*follower{byPid, byTag} {
				// Output from before the connect is not replayed.
				fl.until("new output", func(r *envdRun) bool { return r.stdout.String() == "after\n" })
			}
			if _, err := c.CloseStdin(ctx, connect.NewRequest(&process.CloseStdinRequest{Process: pidSel(pid)})); err != nil {
				t.Fatal(err)
			}
			for _, fl := range []*follower{byPid, byTag} {
				if r := fl.mustEnd(); r.end.GetExitCode() != 0 {
					t.Fatalf("end %v", r.end)
				}
			}
			// Once ended, the process is gone for E2B's API.
			wantCode(t, follow(t, connectStream(c, pidSel(pid))).finish(), connect.CodeNotFound)
		})
	}
}

func TestEnvdKill(t *testing.T) {
	e := newEnvdEnv(t, agenttest.Users(t))
	c := e.client("http1")
	ctx := context.Background()
	for _, tc := range []struct {
		sig    process.Signal
		status string
	}{{process.Signal_SIGNAL_SIGKILL, "signal: killed"}, {process.Signal_SIGNAL_SIGTERM, "signal: terminated"}} {
		f := follow(t, startStream(c, connect.NewRequest(bashReq("sleep 30; echo not reached"))))
		f.until("start", func(r *envdRun) bool { return r.pid != 0 })
		pid := f.got.pid
		if tc.sig == process.Signal_SIGNAL_SIGKILL {
			_, err := c.SendSignal(ctx, connect.NewRequest(&process.SendSignalRequest{Process: pidSel(pid)}))
			wantCode(t, err, connect.CodeInvalidArgument)
		}
		if _, err := c.SendSignal(ctx, connect.NewRequest(&process.SendSignalRequest{Process: pidSel(pid), Signal: tc.sig})); err != nil {
			t.Fatal(err)
		}
		r := f.mustEnd()
		if r.end.GetExitCode() != -1 || r.end.GetExited() || r.end.GetStatus() != tc.status || r.end.GetError() != tc.status {
			t.Fatalf("%v: end %v", tc.sig, r.end)
		}
		if r.stdout.Len() != 0 {
			t.Fatalf("the shell's child outlived the group: %q", r.stdout.String())
		}
		_, err := c.SendSignal(ctx, connect.NewRequest(&process.SendSignalRequest{Process: pidSel(pid), Signal: tc.sig}))
		wantCode(t, err, connect.CodeNotFound)
	}
}

// TestEnvdDeadlineKills: as in envd, the Start stream's deadline
// (Connect-Timeout-Ms, the SDK's timeoutMs) is the command's timeout.
func TestEnvdDeadlineKills(t *testing.T) {
	e := newEnvdEnv(t, agenttest.Users(t))
	c := e.client("http1")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := c.Start(ctx, connect.NewRequest(bashReq("sleep 30")))
	if err != nil {
		t.Fatal(err)
	}
	var pid uint32
	for st.Receive() {
		if s := st.Msg().GetEvent().GetStart(); s != nil {
			pid = s.GetPid()
		}
	}
	wantCode(t, st.Err(), connect.CodeDeadlineExceeded)
	st.Close()
	if pid == 0 {
		t.Fatal("no start event before the deadline")
	}
	p, err := e.svc.reg.lookup(&agentv1.ProcessRef{Pid: int32(pid)})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.ended:
	case <-time.After(30 * time.Second):
		t.Fatal("the command outlived its deadline")
	}
	if ex := e.svc.reg.exitOf(p).GetExited(); !ex.GetTimedOut() || ex.GetSignal() != "killed" {
		t.Fatalf("exit %v", ex)
	}
}

func TestEnvdListSharesRegistry(t *testing.T) {
	e := newEnvdEnv(t, agenttest.Users(t))
	c := e.client("h2c")
	w := e.warren()
	ctx := context.Background()

	tag := "lister"
	req := shReq("echo from-e2b; sleep 30")
	req.Tag = &tag
	req.Process.Envs = map[string]string{"A": "1"}
	req.Process.Cwd = ptr(e.home)
	f := follow(t, startStream(c, connect.NewRequest(req)))
	f.until("output", func(r *envdRun) bool { return r.stdout.String() == "from-e2b\n" })
	e2bPid := f.got.pid
	runEnvd(t, c, connect.NewRequest(shReq("exit 0"))) // ended: not listed

	res, err := w.Start(ctx, connect.NewRequest(&agentv1.StartRequest{Exec: &agentv1.ExecRequest{Argv: []string{"sleep", "30"}}}))
	if err != nil {
		t.Fatal(err)
	}
	warrenPid := uint32(res.Msg.GetProcess().GetPid())

	list, err := c.List(ctx, connect.NewRequest(&process.ListRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	got := map[uint32]*process.ProcessInfo{}
	for _, p := range list.Msg.GetProcesses() {
		got[p.GetPid()] = p
	}
	if len(got) != 2 {
		t.Fatalf("listed %v, want pids %d and %d", list.Msg, e2bPid, warrenPid)
	}
	ep := got[e2bPid]
	if ep.GetTag() != tag || ep.GetConfig().GetCmd() != "/bin/sh" || strings.Join(ep.GetConfig().GetArgs(), " ") != "-c echo from-e2b; sleep 30" ||
		ep.GetConfig().GetEnvs()["A"] != "1" || ep.GetConfig().GetCwd() != e.home {
		t.Fatalf("e2b process listed as %v", ep)
	}
	if wp := got[warrenPid]; wp.GetConfig().GetCmd() != "sleep" || strings.Join(wp.GetConfig().GetArgs(), " ") != "30" || wp.Tag != nil {
		t.Fatalf("warren process listed as %v", wp)
	}

	// warren's API sees the E2B process and its output (the daemon's
	// collector reads it the same way).
	got2 := connectUntil(t, w, &agentv1.ProcessRef{Pid: int32(e2bPid)}, 0, func(c *collected) bool { return c.stdout.String() == "from-e2b\n" })
	if got2.stdout.String() != "from-e2b\n" {
		t.Fatalf("warren connect: %q", got2.stdout.String())
	}
	wl, err := w.List(ctx, connect.NewRequest(&agentv1.ListRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	var seen bool
	for _, p := range wl.Msg.GetProcesses() {
		if uint32(p.GetPid()) == e2bPid && p.GetTag() == tag && p.GetArgv()[0] == "/bin/sh" && p.GetUser() == "user" {
			seen = true
		}
	}
	if !seen {
		t.Fatalf("warren list misses the e2b process: %v", wl.Msg)
	}

	// E2B's API stops a process warren's started, and the other way round.
	kill(t, c, warrenPid)
	connectUntil(t, w, &agentv1.ProcessRef{Pid: int32(warrenPid)}, 0, nil)
	if _, err := w.SendSignal(ctx, connect.NewRequest(&agentv1.SendSignalRequest{Process: &agentv1.ProcessRef{Pid: int32(e2bPid)}, Signal: "SIGKILL"})); err != nil {
		t.Fatal(err)
	}
	if r := f.mustEnd(); r.end.GetStatus() != "signal: killed" {
		t.Fatalf("end %v", r.end)
	}
}

func TestEnvdPTY(t *testing.T) {
	e := newEnvdEnv(t, agenttest.Users(t))
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			c := e.client(tr)
			ctx := context.Background()
			req := &process.StartRequest{
				Process: &process.ProcessConfig{Cmd: "/bin/sh", Args: []string{"-i"}, Envs: map[string]string{"PS1": "$ "}},
				Pty:     &process.PTY{Size: &process.PTY_Size{Cols: 80, Rows: 24}},
			}
			f := follow(t, startStream(c, connect.NewRequest(req)))
			f.until("start", func(r *envdRun) bool { return r.pid != 0 })
			pid := f.got.pid
			send := func(s string) {
				t.Helper()
				in := &process.ProcessInput{Input: &process.ProcessInput_Pty{Pty: []byte(s)}}
				if _, err := c.SendInput(ctx, connect.NewRequest(&process.SendInputRequest{Process: pidSel(pid), Input: in})); err != nil {
					t.Fatal(err)
				}
			}
			// Terminal output is matched past the previous match; "x" markers
			// keep the echoed command line from matching its own output.
			mark := 0
			waitOut := func(want string) {
				t.Helper()
				f.until(fmt.Sprintf("%q on the terminal", want), func(r *envdRun) bool { return strings.Contains(r.pty.String()[mark:], want) })
				mark += strings.Index(f.got.pty.String()[mark:], want) + len(want)
			}

			send("echo x$TERM; tty; stty size\n")
			waitOut("xxterm-256color")
			waitOut("/dev/pts/")
			waitOut("24 80")
			if f.got.stdout.Len() != 0 || f.got.stderr.Len() != 0 {
				t.Fatalf("terminal output came as stdout/stderr: %q %q", f.got.stdout.String(), f.got.stderr.String())
			}

			up := &process.UpdateRequest{Process: pidSel(pid), Pty: &process.PTY{Size: &process.PTY_Size{Cols: 100, Rows: 40}}}
			if _, err := c.Update(ctx, connect.NewRequest(up)); err != nil {
				t.Fatal(err)
			}
			send("stty size\n")
			waitOut("40 100")

			// A terminal takes pty input only, and has no stdin to close.
			in := &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: []byte("x")}}
			_, err := c.SendInput(ctx, connect.NewRequest(&process.SendInputRequest{Process: pidSel(pid), Input: in}))
			wantCode(t, err, connect.CodeFailedPrecondition)
			_, err = c.CloseStdin(ctx, connect.NewRequest(&process.CloseStdinRequest{Process: pidSel(pid)}))
			wantCode(t, err, connect.CodeFailedPrecondition)

			send("exit 7\n")
			if r := f.mustEnd(); r.end.GetExitCode() != 7 || !r.end.GetExited() {
				t.Fatalf("end %v", r.end)
			}
		})
	}
}

// TestEnvdPTYAsSDK starts a terminal exactly as the SDK's pty.create does.
func TestEnvdPTYAsSDK(t *testing.T) {
	e := newEnvdEnv(t, agenttest.Users(t))
	c := e.client("http1")
	req := &process.StartRequest{
		Process: &process.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-i", "-l"}, Envs: map[string]string{"TERM": "xterm-256color", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}},
		Pty:     &process.PTY{Size: &process.PTY_Size{Cols: 120, Rows: 30}},
	}
	f := follow(t, startStream(c, connect.NewRequest(req)))
	f.until("start", func(r *envdRun) bool { return r.pid != 0 })
	in := &process.ProcessInput{Input: &process.ProcessInput_Pty{Pty: []byte("echo x$((6*7)); stty size; exit\n")}}
	if _, err := c.SendInput(context.Background(), connect.NewRequest(&process.SendInputRequest{Process: pidSel(f.got.pid), Input: in})); err != nil {
		t.Fatal(err)
	}
	r := f.mustEnd()
	if out := r.pty.String(); !strings.Contains(out, "x42") || !strings.Contains(out, "30 120") || r.end.GetExitCode() != 0 {
		t.Fatalf("terminal said %q, end %v", out, r.end)
	}
}

func TestEnvdKeepalive(t *testing.T) {
	e := newEnvdEnv(t, agenttest.Users(t))
	c := e.client("http1")
	req := connect.NewRequest(bashReq("cat"))
	req.Msg.Stdin = ptr(true)
	req.Header().Set("Keepalive-Ping-Interval", "1")
	f := follow(t, startStream(c, req))
	f.until("a keepalive", func(r *envdRun) bool { return r.keepalives > 0 })
	if _, err := c.CloseStdin(context.Background(), connect.NewRequest(&process.CloseStdinRequest{Process: pidSel(f.got.pid)})); err != nil {
		t.Fatal(err)
	}
	f.mustEnd()
}

func TestEnvdBadRequests(t *testing.T) {
	e := newEnvdEnv(t, agenttest.Users(t))
	c := e.client("http1")
	ctx := context.Background()
	const missing = 999999

	wantCode(t, follow(t, connectStream(c, pidSel(missing))).finish(), connect.CodeNotFound)
	wantCode(t, follow(t, connectStream(c, tagSel("nope"))).finish(), connect.CodeNotFound)
	wantCode(t, follow(t, connectStream(c, &process.ProcessSelector{})).finish(), connect.CodeInvalidArgument)
	wantCode(t, follow(t, connectStream(c, nil)).finish(), connect.CodeInvalidArgument)

	_, err := c.SendSignal(ctx, connect.NewRequest(&process.SendSignalRequest{Process: pidSel(missing), Signal: process.Signal_SIGNAL_SIGKILL}))
	wantCode(t, err, connect.CodeNotFound)
	in := &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: []byte("x")}}
	_, err = c.SendInput(ctx, connect.NewRequest(&process.SendInputRequest{Process: pidSel(missing), Input: in}))
	wantCode(t, err, connect.CodeNotFound)
	_, err = c.CloseStdin(ctx, connect.NewRequest(&process.CloseStdinRequest{Process: pidSel(missing)}))
	wantCode(t, err, connect.CodeNotFound)
	_, err = c.Update(ctx, connect.NewRequest(&process.UpdateRequest{Process: pidSel(missing)}))
	wantCode(t, err, connect.CodeNotFound)

	for name, req := range map[string]*process.StartRequest{
		"no process":  {},
		"no cmd":      {Process: &process.ProcessConfig{Args: []string{"x"}}},
		"no program":  {Process: &process.ProcessConfig{Cmd: "no-such-program-here"}},
		"bad env":     {Process: &process.ProcessConfig{Cmd: "true", Envs: map[string]string{"A=B": "c"}}},
		"nul in args": {Process: &process.ProcessConfig{Cmd: "echo", Args: []string{"a\x00b"}}},
		"bad tag":     {Process: &process.ProcessConfig{Cmd: "true"}, Tag: ptr("no spaces")},
		"huge pty":    {Process: &process.ProcessConfig{Cmd: "true"}, Pty: &process.PTY{Size: &process.PTY_Size{Cols: 70000, Rows: 1}}},
	} {
		if err := follow(t, startStream(c, connect.NewRequest(req))).finish(); connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Errorf("%s: %v, want invalid_argument", name, err)
		}
	}

	// A non-terminal process cannot be resized; a running tag is taken.
	tag := "only-one"
	req := bashReq("sleep 30")
	req.Tag = &tag
	f := follow(t, startStream(c, connect.NewRequest(req)))
	f.until("start", func(r *envdRun) bool { return r.pid != 0 })
	_, err = c.Update(ctx, connect.NewRequest(&process.UpdateRequest{Process: pidSel(f.got.pid), Pty: &process.PTY{Size: &process.PTY_Size{Cols: 1, Rows: 1}}}))
	wantCode(t, err, connect.CodeFailedPrecondition)
	wantCode(t, follow(t, startStream(c, connect.NewRequest(req))).finish(), connect.CodeAlreadyExists)
	kill(t, c, f.got.pid)
	f.mustEnd()
}

// TestEnvdLargeOutput: output far beyond the rings reaches a Start stream
// whole, even from a client that stops reading for a while: the stream holds
// the command back rather than lose any.
func TestEnvdLargeOutput(t *testing.T) {
	e := newEnvdEnv(t, agenttest.Users(t))
	const n = 8*RingBytes + 12345
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			req := connect.NewRequest(shReq(fmt.Sprintf("head -c %d /dev/zero | tr '\\0' a; echo end >&2", n)))
			st, err := e.client(tr).Start(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			var stdout, stderr bytes.Buffer
			var end *process.ProcessEvent_EndEvent
			for events := 0; st.Receive(); events++ {
				if events == 1 {
					time.Sleep(300 * time.Millisecond) // a slow client
				}
				ev := st.Msg().GetEvent()
				stdout.Write(ev.GetData().GetStdout())
				stderr.Write(ev.GetData().GetStderr())
				if ev.GetEnd() != nil {
					end = ev.GetEnd()
				}
			}
			if err := st.Err(); err != nil {
				t.Fatal(err)
			}
			if stdout.Len() != n || strings.Trim(stdout.String(), "a") != "" || stderr.String() != "end\n" || end.GetExitCode() != 0 {
				t.Fatalf("got %d bytes of stdout (want %d), stderr %q, end %v", stdout.Len(), n, stderr.String(), end)
			}
		})
	}
}

// TestDrainReadsWhatIsLeft: once the drain deadline has passed (a child
// holds the pipe open), what is already in the pipe is still collected.
func TestDrainReadsWhatIsLeft(t *testing.T) {
	svc := New(Config{Workspace: t.TempDir(), Users: agenttest.Users(t)}, testReaper)
	p := &proc{pid: 1 << 22}
	svc.reg.add(p)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close() // held open, as by a lingering child
	data := bytes.Repeat([]byte("x"), 60000)
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	_ = r.SetReadDeadline(time.Now().Add(-time.Second))
	var wg sync.WaitGroup
	wg.Add(1)
	svc.drain(&wg, p, r, agentv1.Stream_STREAM_STDOUT)
	if got, at := svc.reg.read(p, agentv1.Stream_STREAM_STDOUT, 0, 1<<20); at != 0 || !bytes.Equal(got, data) {
		t.Fatalf("collected %d bytes at %d, want %d", len(got), at, len(data))
	}
}
