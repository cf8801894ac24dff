package process

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"connectrpc.com/connect"
	"golang.org/x/sys/unix"

	agentv1 "github.com/warrenhq/warren/api/gen/warren/agent/v1"
)

// maxInputBytes bounds one SendInput.
const maxInputBytes = 4 << 20

// allowedSignals are the signals a client may send. Others (SIGSEGV,
// SIGSYS, real-time signals…) have no use for controlling a process.
var allowedSignals = map[string]unix.Signal{
	"SIGTERM": unix.SIGTERM, "SIGKILL": unix.SIGKILL, "SIGINT": unix.SIGINT,
	"SIGHUP": unix.SIGHUP, "SIGQUIT": unix.SIGQUIT, "SIGUSR1": unix.SIGUSR1,
	"SIGUSR2": unix.SIGUSR2, "SIGSTOP": unix.SIGSTOP, "SIGCONT": unix.SIGCONT,
}

// ParseSignal reads "SIGTERM", "TERM" or "term"; ok is false for anything
// outside the allowed set.
func ParseSignal(name string) (unix.Signal, bool) {
	n := strings.ToUpper(strings.TrimSpace(name))
	if !strings.HasPrefix(n, "SIG") {
		n = "SIG" + n
	}
	sig, ok := allowedSignals[n]
	return sig, ok
}

// List describes the background processes.
func (s *Service) List(ctx context.Context, req *connect.Request[agentv1.ListRequest]) (*connect.Response[agentv1.ListResponse], error) {
	s.reg.mu.Lock()
	s.reg.pruneLocked()
	s.reg.mu.Unlock()
	procs, _ := s.reg.snapshot()
	res := &agentv1.ListResponse{Instance: s.reg.instance}
	for _, p := range procs {
		res.Processes = append(res.Processes, s.reg.info(p))
	}
	return connect.NewResponse(res), nil
}

// SendInput writes to a process's stdin.
func (s *Service) SendInput(ctx context.Context, req *connect.Request[agentv1.SendInputRequest]) (*connect.Response[agentv1.SendInputResponse], error) {
	if len(req.Msg.GetData()) > maxInputBytes {
		return nil, invalid("input is %d bytes; send at most %d at a time", len(req.Msg.GetData()), maxInputBytes)
	}
	p, err := s.reg.lookup(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if err := p.writeStdin(req.Msg.GetData()); err != nil {
		return nil, err
	}
	return connect.NewResponse(&agentv1.SendInputResponse{}), nil
}

// CloseStdin closes a process's stdin.
func (s *Service) CloseStdin(ctx context.Context, req *connect.Request[agentv1.CloseStdinRequest]) (*connect.Response[agentv1.CloseStdinResponse], error) {
	p, err := s.reg.lookup(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	p.closeStdin()
	s.reg.mu.Lock()
	s.reg.notifyLocked()
	s.reg.mu.Unlock()
	return connect.NewResponse(&agentv1.CloseStdinResponse{}), nil
}

// SendSignal signals a process's process group (the process and whatever
// it started), so that a shell's children stop with it.
func (s *Service) SendSignal(ctx context.Context, req *connect.Request[agentv1.SendSignalRequest]) (*connect.Response[agentv1.SendSignalResponse], error) {
	sig, ok := ParseSignal(req.Msg.GetSignal())
	if !ok {
		return nil, invalid("signal %q is not allowed: use one of SIGTERM, SIGKILL, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGSTOP, SIGCONT", req.Msg.GetSignal())
	}
	p, err := s.reg.lookup(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if s.reg.exitOf(p) != nil {
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("process %d has already exited", p.pid))
	}
	if err := unix.Kill(-p.pid, sig); err != nil {
		if errors.Is(err, unix.ESRCH) {
			return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("process %d has already exited", p.pid))
		}
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("signal process %d: %w", p.pid, err))
	}
	return connect.NewResponse(&agentv1.SendSignalResponse{}), nil
}
