package process

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/agent/internal/users"
	"github.com/warrenhq/warren/api/gen/process"
	"github.com/warrenhq/warren/api/gen/process/processconnect"
	agentv1 "github.com/warrenhq/warren/api/gen/warren/agent/v1"
)

// Envd serves E2B's process.Process service (the API of E2B's in-sandbox
// daemon, envd) over the same registry as warren's own process API: a
// command E2B's SDK starts is listed, followed and collected like one
// warren started, and the other way round.
type Envd struct{ s *Service }

var _ processconnect.ProcessHandler = (*Envd)(nil)

// HandleEnvd mounts E2B's process service on mux.
func (s *Service) HandleEnvd(mux *http.ServeMux, opts ...connect.HandlerOption) {
	path, h := processconnect.NewProcessHandler(&Envd{s: s}, opts...)
	mux.Handle(path, coalesceFlushes(h))
}

const (
	// defaultKeepalive is envd's keepalive interval when the client names
	// none (the SDK asks for 50s).
	defaultKeepalive = 90 * time.Second
	// ptyTerm is the TERM of a terminal whose request sets none.
	ptyTerm = "xterm-256color"
)

// Start runs a command and streams its events. The command outlives the
// stream: a client that goes away can Connect again. The stream's deadline
// (Connect-Timeout-Ms, the SDK's timeoutMs, 60s unless set; 0 sends none)
// is the command's timeout, as in envd: the command is killed when it passes.
func (e *Envd) Start(ctx context.Context, req *connect.Request[process.StartRequest], stream *connect.ServerStream[process.StartResponse]) error {
	s := e.s
	defer s.follows()()
	sp, err := s.envdSpec(req.Header(), req.Msg)
	if err != nil {
		return err
	}
	tag := req.Msg.GetTag()
	if tag != "" && !validTag(tag) {
		return invalid("tag %q: use 1 to 128 letters, digits, '.', '_' or '-'", tag)
	}
	term := req.Msg.GetPty()
	var cols, rows uint16
	if term != nil {
		if cols, rows, err = termSize(term); err != nil {
			return err
		}
	}
	if dl, ok := ctx.Deadline(); ok {
		if sp.timeout = time.Until(dl); sp.timeout <= 0 {
			return connect.NewError(connect.CodeDeadlineExceeded, errors.New("the request's deadline passed before the command started"))
		}
	}
	// envd keeps stdin open unless the request says stdin: false (SDKs
	// older than the flag expect to write to every command).
	sp.keepStdin = req.Msg.Stdin == nil || req.Msg.GetStdin()

	s.startMu.Lock()
	if err := s.reg.reserve(tag); err != nil {
		s.startMu.Unlock()
		return err
	}
	var r *running
	if term != nil {
		r, err = s.startPTY(sp, cols, rows)
	} else {
		r, err = s.start(sp)
	}
	if err != nil {
		s.startMu.Unlock()
		return connect.NewError(connect.CodeInvalidArgument, err)
	}
	p := &proc{
		pid: r.pid, tag: tag, argv: sp.argv, cwd: sp.dir, user: sp.user,
		startedAt: s.reg.now(), stdin: r.stdin, stdinPipe: r.stdin,
		config: req.Msg.GetProcess(),
	}
	if term != nil {
		p.tty = r.stdout
	}
	p.stdinOpen.Store(r.stdin != nil)
	s.reg.add(p)
	// Attached before the readers start, so the stream misses nothing.
	f := s.reg.subscribe(p)
	s.startMu.Unlock()
	defer s.reg.unsubscribe(p, f)
	go s.supervise(p, r)
	s.cfg.Log.Debug("e2b process started", "pid", r.pid, "tag", tag, "pty", term != nil, "cmd", sp.argv[0])

	send := func(ev *process.ProcessEvent) error { return stream.Send(&process.StartResponse{Event: ev}) }
	return s.followFeed(ctx, p, f, keepaliveInterval(req.Header()), send)
}

// Connect streams a running process's events: start, its output from now
// on (envd does not replay earlier output), then its end.
func (e *Envd) Connect(ctx context.Context, req *connect.Request[process.ConnectRequest], stream *connect.ServerStream[process.ConnectResponse]) error {
	s := e.s
	defer s.follows()()
	p, err := s.reg.lookupRunning(req.Msg.GetProcess())
	if err != nil {
		return err
	}
	f := s.reg.subscribe(p)
	defer s.reg.unsubscribe(p, f)
	send := func(ev *process.ProcessEvent) error { return stream.Send(&process.ConnectResponse{Event: ev}) }
	return s.followFeed(ctx, p, f, keepaliveInterval(req.Header()), send)
}

// followFeed sends p's start, its output as it comes, a keepalive whenever
// the stream has been quiet for a keepalive interval, and p's end. Events
// that are ready together leave in one flush (coalesce.go).
func (s *Service) followFeed(ctx context.Context, p *proc, f *feed, every time.Duration, send func(*process.ProcessEvent) error) error {
	batch := coalescerOf(ctx)
	tick := time.NewTicker(every)
	defer tick.Stop()
	batch.hold()
	ended, err := sendReady(p, f, send, startEvent(p))
	for err == nil && !ended {
		batch.release()
		select {
		case c := <-f.ch:
			batch.hold()
			ended, err = sendReady(p, f, send, dataEvent(p, c))
			tick.Reset(every)
		case <-p.ended:
			batch.hold()
			ended, err = sendReady(p, f, send, nil)
		case <-tick.C:
			err = send(&process.ProcessEvent{Event: &process.ProcessEvent_Keepalive{Keepalive: &process.ProcessEvent_KeepAlive{}}})
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return connect.NewError(connect.CodeDeadlineExceeded, ctx.Err())
			}
			return connect.NewError(connect.CodeCanceled, ctx.Err())
		}
	}
	// After the end event the batch stays held: connect-go's end-of-stream
	// message follows at once, and the server's flush when the handler
	// returns sends the rest of the stream in one write.
	return err
}

// sendReady sends first (when not nil) and every event already waiting
// after it: p's queued output, then its end if it has ended. It never waits
// for an event, and says whether it sent the end.
func sendReady(p *proc, f *feed, send func(*process.ProcessEvent) error, first *process.ProcessEvent) (ended bool, err error) {
	if first != nil {
		if err := send(first); err != nil {
			return false, err
		}
	}
	// Every chunk is handed over before the process is marked ended: once
	// it is, what the feed holds is the rest of the output.
	select {
	case <-p.ended:
		ended = true
	default:
	}
	for queued := true; queued; {
		select {
		case c := <-f.ch:
			if err := send(dataEvent(p, c)); err != nil {
				return false, err
			}
		default:
			queued = false
		}
	}
	if !ended {
		return false, nil
	}
	return true, send(endEvent(p.status))
}

// envdSpec resolves a Start request the way envd does: the user from the
// Basic Authorization header (default: the sandbox's default user), the
// working directory relative to their home, HOME/USER/LOGNAME/SHELL for
// them, then the request's variables on top.
func (s *Service) envdSpec(h http.Header, req *process.StartRequest) (*spec, error) {
	name, err := users.NameFromHeader(h)
	if err != nil {
		return nil, connect.NewError(connect.CodeUnauthenticated, err)
	}
	cfg := req.GetProcess()
	if cfg.GetCmd() == "" {
		return nil, invalid("process.cmd is required: say what to run")
	}
	if hasNUL(cfg.GetArgs()...) || hasNUL(cfg.GetCmd(), cfg.GetCwd()) {
		return nil, invalid("cmd, args and cwd must not contain NUL bytes")
	}
	if err := checkEnv(cfg.GetEnvs()); err != nil {
		return nil, err
	}
	envs := make(map[string]string, len(cfg.GetEnvs())+1)
	for k, v := range cfg.GetEnvs() {
		envs[k] = v
	}
	if _, ok := envs["TERM"]; !ok && req.GetPty() != nil {
		envs["TERM"] = ptyTerm
	}
	u, err := s.cfg.Users.Lookup(name)
	if err != nil {
		if errors.Is(err, users.ErrUnknown) {
			return nil, connect.NewError(connect.CodeUnauthenticated, fmt.Errorf("invalid username %q: %w", name, err))
		}
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("resolve user: %w", err))
	}
	sp := &spec{env: buildEnv(u, envs), cred: u.Credential(), user: u.Name}
	sp.dir = homeRelative(cfg.GetCwd(), u.Home, s.cfg.Users.DefaultDir(u.Home))
	if fi, err := os.Stat(sp.dir); err != nil {
		return nil, invalid("cwd '%s' does not exist", sp.dir)
	} else if !fi.IsDir() {
		return nil, invalid("cwd '%s' is not a directory", sp.dir)
	}
	sp.argv = noBashFallback(append([]string{cfg.GetCmd()}, cfg.GetArgs()...))
	if sp.path, err = lookPath(sp.argv[0], envValue(sp.env, "PATH"), sp.dir); err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	return sp, nil
}

// homeRelative resolves a path the way envd does: "" is base (the template's
// workdir, else home), "~" expands to home, and a relative path is taken
// from base.
func homeRelative(p, home, base string) string {
	switch {
	case p == "":
		return base
	case p == "~" || strings.HasPrefix(p, "~/"):
		return filepath.Join(home, p[1:])
	case !filepath.IsAbs(p):
		return filepath.Join(base, p)
	}
	return filepath.Clean(p)
}

func termSize(t *process.PTY) (cols, rows uint16, err error) {
	c, r := t.GetSize().GetCols(), t.GetSize().GetRows()
	if c > 0xffff || r > 0xffff {
		return 0, 0, invalid("terminal size %dx%d is too large", c, r)
	}
	return uint16(c), uint16(r), nil
}

// keepaliveInterval reads Keepalive-Ping-Interval (seconds).
func keepaliveInterval(h http.Header) time.Duration {
	n, err := strconv.ParseInt(h.Get("Keepalive-Ping-Interval"), 10, 64)
	if err != nil || n <= 0 || n > int64(24*time.Hour/time.Second) {
		return defaultKeepalive
	}
	return time.Duration(n) * time.Second
}

func startEvent(p *proc) *process.ProcessEvent {
	return &process.ProcessEvent{Event: &process.ProcessEvent_Start{Start: &process.ProcessEvent_StartEvent{Pid: uint32(p.pid)}}}
}

func dataEvent(p *proc, c feedChunk) *process.ProcessEvent {
	d := &process.ProcessEvent_DataEvent{}
	switch {
	case p.tty != nil:
		d.Output = &process.ProcessEvent_DataEvent_Pty{Pty: c.data}
	case c.stream == agentv1.Stream_STREAM_STDERR:
		d.Output = &process.ProcessEvent_DataEvent_Stderr{Stderr: c.data}
	default:
		d.Output = &process.ProcessEvent_DataEvent_Stdout{Stdout: c.data}
	}
	return &process.ProcessEvent{Event: &process.ProcessEvent_Data{Data: d}}
}
