package process

import (
	"context"
	"errors"
	"fmt"
	"os"

	"connectrpc.com/connect"
	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/api/gen/process"
)

// List reports the running processes, whichever API started them.
func (e *Envd) List(ctx context.Context, req *connect.Request[process.ListRequest]) (*connect.Response[process.ListResponse], error) {
	res := &process.ListResponse{}
	for _, p := range e.s.reg.running() {
		info := &process.ProcessInfo{Pid: uint32(p.pid), Config: p.config}
		if info.Config == nil {
			// Started through warren's API: describe it from its argv.
			cwd := p.cwd
			info.Config = &process.ProcessConfig{Cmd: p.argv[0], Args: p.argv[1:], Cwd: &cwd}
		}
		if p.tag != "" {
			tag := p.tag
			info.Tag = &tag
		}
		res.Processes = append(res.Processes, info)
	}
	return connect.NewResponse(res), nil
}

// SendInput writes to a process's stdin or terminal.
func (e *Envd) SendInput(ctx context.Context, req *connect.Request[process.SendInputRequest]) (*connect.Response[process.SendInputResponse], error) {
	p, err := e.s.reg.lookupRunning(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if err := writeInput(p, req.Msg.GetInput()); err != nil {
		return nil, err
	}
	return connect.NewResponse(&process.SendInputResponse{}), nil
}

// StreamInput takes a start event naming the process, then input events.
func (e *Envd) StreamInput(ctx context.Context, stream *connect.ClientStream[process.StreamInputRequest]) (*connect.Response[process.StreamInputResponse], error) {
	var p *proc
	for stream.Receive() {
		switch ev := stream.Msg().GetEvent().(type) {
		case *process.StreamInputRequest_Start:
			var err error
			if p, err = e.s.reg.lookupRunning(ev.Start.GetProcess()); err != nil {
				return nil, err
			}
		case *process.StreamInputRequest_Data:
			if p == nil {
				return nil, invalid("send a start event naming the process before input")
			}
			if err := writeInput(p, ev.Data.GetInput()); err != nil {
				return nil, err
			}
		case *process.StreamInputRequest_Keepalive:
		default:
			return nil, invalid("each message must be a start, data or keepalive event")
		}
	}
	if err := stream.Err(); err != nil {
		return nil, err
	}
	return connect.NewResponse(&process.StreamInputResponse{}), nil
}

// writeInput sends input where the process reads it: a terminal takes pty
// input, any other process stdin (when it was started with stdin open).
func writeInput(p *proc, in *process.ProcessInput) error {
	var data []byte
	switch v := in.GetInput().(type) {
	case *process.ProcessInput_Stdin:
		if p.tty != nil {
			return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("process %d runs in a terminal: send its input as pty", p.pid))
		}
		if !p.stdinOpen.Load() {
			return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("process %d has no open stdin (start it with stdin: true)", p.pid))
		}
		data = v.Stdin
	case *process.ProcessInput_Pty:
		if p.tty == nil {
			return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("process %d has no terminal: send its input as stdin", p.pid))
		}
		data = v.Pty
	default:
		return invalid("input must be stdin or pty")
	}
	if len(data) > maxInputBytes {
		return invalid("input is %d bytes; send at most %d at a time", len(data), maxInputBytes)
	}
	return p.writeStdin(data)
}

// CloseStdin closes a process's stdin (EOF). A terminal has no stdin of its
// own to close: send it Ctrl-D instead, as envd says.
func (e *Envd) CloseStdin(ctx context.Context, req *connect.Request[process.CloseStdinRequest]) (*connect.Response[process.CloseStdinResponse], error) {
	s := e.s
	p, err := s.reg.lookupRunning(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if p.tty != nil {
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("process %d runs in a terminal: send Ctrl-D (0x04) as pty input instead", p.pid))
	}
	p.closeStdin()
	s.reg.mu.Lock()
	s.reg.notifyLocked()
	s.reg.mu.Unlock()
	return connect.NewResponse(&process.CloseStdinResponse{}), nil
}

// SendSignal sends SIGTERM or SIGKILL to the process's group, so that what
// a shell started stops with it.
func (e *Envd) SendSignal(ctx context.Context, req *connect.Request[process.SendSignalRequest]) (*connect.Response[process.SendSignalResponse], error) {
	p, err := e.s.reg.lookupRunning(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	var sig unix.Signal
	switch req.Msg.GetSignal() {
	case process.Signal_SIGNAL_SIGKILL:
		sig = unix.SIGKILL
	case process.Signal_SIGNAL_SIGTERM:
		sig = unix.SIGTERM
	default:
		return nil, invalid("signal %v is not supported: use SIGNAL_SIGTERM or SIGNAL_SIGKILL", req.Msg.GetSignal())
	}
	err = unix.Kill(-p.pid, sig)
	if errors.Is(err, unix.ESRCH) {
		// The process left its group (setsid, setpgid): signal it alone.
		err = unix.Kill(p.pid, sig)
	}
	switch {
	case err == nil:
	case errors.Is(err, unix.ESRCH):
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("process with pid %d not found", p.pid))
	default:
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("signal process %d: %w", p.pid, err))
	}
	return connect.NewResponse(&process.SendSignalResponse{}), nil
}

// Update resizes a process's terminal.
func (e *Envd) Update(ctx context.Context, req *connect.Request[process.UpdateRequest]) (*connect.Response[process.UpdateResponse], error) {
	p, err := e.s.reg.lookupRunning(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if req.Msg.GetPty() == nil {
		return connect.NewResponse(&process.UpdateResponse{}), nil
	}
	if p.tty == nil {
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("process %d has no terminal to resize", p.pid))
	}
	cols, rows, err := termSize(req.Msg.GetPty())
	if err != nil {
		return nil, err
	}
	if err := setWinsize(p.tty, cols, rows); err != nil {
		if errors.Is(err, os.ErrClosed) {
			return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("process with pid %d has ended", p.pid))
		}
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("resize terminal of process %d: %w", p.pid, err))
	}
	return connect.NewResponse(&process.UpdateResponse{}), nil
}

// lookupRunning finds a running process by E2B's selector. An exited
// process is not found, as in envd, which forgets a process when it ends.
func (g *registry) lookupRunning(sel *process.ProcessSelector) (*proc, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch v := sel.GetSelector().(type) {
	case *process.ProcessSelector_Pid:
		if p := g.procs[int(v.Pid)]; p != nil && p.exited == nil {
			return p, nil
		}
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("process with pid %d not found", v.Pid))
	case *process.ProcessSelector_Tag:
		var best *proc
		for _, p := range g.procs {
			if p.tag == v.Tag && p.exited == nil && (best == nil || p.seq > best.seq) {
				best = p
			}
		}
		if best == nil {
			return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("process with tag %q not found", v.Tag))
		}
		return best, nil
	default:
		return nil, invalid("name the process by pid or tag")
	}
}

// running returns the processes still running, in start order.
func (g *registry) running() []*proc {
	procs, _ := g.snapshot()
	g.mu.Lock()
	defer g.mu.Unlock()
	out := procs[:0]
	for _, p := range procs {
		if p.exited == nil {
			out = append(out, p)
		}
	}
	return out
}

// endEvent describes how a process ended the way envd does (Go's
// os.ProcessState): a process killed by a signal has exit code -1 and
// exited false, and error repeats the status unless it exited with 0.
func endEvent(ws unix.WaitStatus) *process.ProcessEvent {
	end := &process.ProcessEvent_EndEvent{ExitCode: -1}
	switch {
	case ws.Exited():
		end.ExitCode = int32(ws.ExitStatus())
		end.Exited = true
		end.Status = fmt.Sprintf("exit status %d", ws.ExitStatus())
	case ws.Signaled():
		end.Status = "signal: " + ws.Signal().String()
	default:
		end.Status = fmt.Sprintf("wait status %#x", uint32(ws))
	}
	if ws.CoreDump() {
		end.Status += " (core dumped)"
	}
	if !end.Exited || end.ExitCode != 0 {
		msg := end.Status
		end.Error = &msg
	}
	return &process.ProcessEvent{Event: &process.ProcessEvent_End{End: end}}
}
