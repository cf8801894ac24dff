package process

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/sys/unix"

	agentv1 "github.com/warrenhq/warren/api/gen/warren/agent/v1"
)

// stdinWriteTimeout bounds one SendInput: a process that does not read its
// stdin must not hold the call (and the daemon's request) forever.
const stdinWriteTimeout = 5 * time.Second

// validTag reports whether tag is 1 to 128 letters, digits, '.', '_' or
// '-'. (Not a regexp: `{1,128}` compiles into 128 copies of the class, a
// cost every agent start would pay.)
func validTag(tag string) bool {
	if len(tag) == 0 || len(tag) > 128 {
		return false
	}
	for i := 0; i < len(tag); i++ {
		c := tag[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Start starts a background process and answers with its pid at once.
func (s *Service) Start(ctx context.Context, req *connect.Request[agentv1.StartRequest]) (*connect.Response[agentv1.StartResponse], error) {
	tag := req.Msg.GetTag()
	if tag != "" && !validTag(tag) {
		return nil, invalid("tag %q: use 1 to 128 letters, digits, '.', '_' or '-'", tag)
	}
	if req.Msg.GetExec() == nil {
		return nil, invalid("exec is required: say what to run")
	}
	sp, err := s.buildSpec(req.Msg.GetExec())
	if err != nil {
		var se startError
		if errors.As(err, &se) {
			return nil, connect.NewError(connect.CodeInvalidArgument, err)
		}
		return nil, err
	}
	sp.keepStdin = true
	// Serialised so that two Starts cannot both take the same tag.
	s.startMu.Lock()
	defer s.startMu.Unlock()
	if err := s.reg.reserve(tag); err != nil {
		return nil, err
	}
	r, err := s.start(sp)
	if err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	p := &proc{
		pid: r.pid, tag: tag, argv: sp.argv, cwd: sp.dir, user: sp.user,
		startedAt: s.reg.now(), stdin: r.stdin, stdinPipe: r.stdin,
	}
	p.stdinOpen.Store(true)
	s.reg.add(p)
	if len(sp.stdin) > 0 {
		go func() { _ = p.writeStdin(sp.stdin) }()
	}
	go s.supervise(p, r)
	s.cfg.Log.Debug("background process started", "pid", r.pid, "tag", tag, "argv0", sp.argv[0])
	return connect.NewResponse(&agentv1.StartResponse{Process: s.reg.info(p)}), nil
}

// supervise copies the process's output into its rings until it has exited
// and its pipes are drained, then records the exit.
func (s *Service) supervise(p *proc, r *running) {
	var wg sync.WaitGroup
	outputs := map[agentv1.Stream]*os.File{agentv1.Stream_STREAM_STDOUT: r.stdout}
	if r.stderr != nil { // a terminal has a single output
		outputs[agentv1.Stream_STREAM_STDERR] = r.stderr
	}
	wg.Add(len(outputs))
	for stream, f := range outputs {
		go s.drain(&wg, p, f, stream)
	}

	exited := &agentv1.Exited{}
	var status unix.WaitStatus
	var timeout <-chan time.Time
	if r.sp.timeout > 0 {
		t := time.NewTimer(r.sp.timeout)
		defer t.Stop()
		timeout = t.C
	}
	for waiting := true; waiting; {
		select {
		case ws := <-r.status:
			fillStatus(exited, ws)
			status = ws
			waiting = false
		case <-timeout:
			timeout = nil
			exited.TimedOut = true
			r.kill()
		}
	}
	// A child that inherited the pipes may keep them open: read what is
	// there, but do not wait for it.
	deadline := time.Now().Add(drainGrace)
	for _, f := range outputs {
		_ = f.SetReadDeadline(deadline)
	}
	wg.Wait()
	p.closeStdin()
	s.reg.markExited(p, exited, status)
}

func (s *Service) drain(wg *sync.WaitGroup, p *proc, f *os.File, stream agentv1.Stream) {
	defer wg.Done()
	defer f.Close()
	bp := readBuffers.Get().(*[]byte)
	defer readBuffers.Put(bp)
	buf := *bp
	for {
		n, err := f.Read(buf)
		if n > 0 {
			s.reg.appendOutput(p, stream, buf[:n]) // the ring copies
			s.reg.publish(p, stream, buf[:n])
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			s.drainPending(p, f, stream, buf)
		}
		if err != nil {
			return
		}
	}
}

// drainPending reads what is already in the pipe once the drain deadline has
// passed: the process has exited, so its last output is all there, but a
// reader held up by a slow E2B stream may not have got to it in time.
// Output a lingering child writes later is left unread.
func (s *Service) drainPending(p *proc, f *os.File, stream agentv1.Stream, buf []byte) {
	left, err := pendingBytes(f)
	if err != nil || left <= 0 {
		return
	}
	_ = f.SetReadDeadline(time.Now().Add(drainGrace))
	for left > 0 {
		n, err := f.Read(buf[:min(left, len(buf))])
		if n > 0 {
			s.reg.appendOutput(p, stream, buf[:n])
			s.reg.publish(p, stream, buf[:n])
			left -= n
		}
		if err != nil {
			return
		}
	}
}

// pendingBytes is how many bytes f (a pipe or a terminal) holds unread
// (FIONREAD, which Linux names TIOCINQ).
func pendingBytes(f *os.File) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	var n int
	var ierr error
	if err := rc.Control(func(fd uintptr) { n, ierr = unix.IoctlGetInt(int(fd), unix.TIOCINQ) }); err != nil {
		return 0, err
	}
	return n, ierr
}

// writeStdin writes data to the process's stdin, giving up after
// stdinWriteTimeout if the process does not read it.
func (p *proc) writeStdin(data []byte) error {
	p.stdinMu.Lock()
	defer p.stdinMu.Unlock()
	if p.stdin == nil {
		return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("process %d: its stdin is closed", p.pid))
	}
	_ = p.stdin.SetWriteDeadline(time.Now().Add(stdinWriteTimeout))
	n, err := p.stdin.Write(data)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, os.ErrDeadlineExceeded):
		return connect.NewError(connect.CodeUnavailable, fmt.Errorf("process %d did not read its stdin within %s (%d of %d bytes written)", p.pid, stdinWriteTimeout, n, len(data)))
	default:
		return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("process %d: write stdin: %w", p.pid, err))
	}
}

// closeStdin closes the process's stdin (EOF); closing twice is fine. A
// write blocked on a full pipe is cut short first.
func (p *proc) closeStdin() {
	p.stdinOpen.Store(false)
	if p.stdinPipe != nil {
		_ = p.stdinPipe.SetWriteDeadline(time.Now())
	}
	p.stdinMu.Lock()
	defer p.stdinMu.Unlock()
	if p.stdin != nil {
		p.stdin.Close()
		p.stdin = nil
	}
}
