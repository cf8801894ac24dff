package commands

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"

	agentv1 "github.com/warrenhq/warren/api/gen/warren/agent/v1"
	"github.com/warrenhq/warren/api/gen/warren/agent/v1/agentv1connect"
	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/procs"
)

const (
	// MaxStdin bounds one stdin write (the agent's own bound).
	MaxStdin = 4 << 20
	// knownWait bounds how long a start waits for the host's collector to
	// hear of the new process, so that list and output see it at once.
	knownWait = 2 * time.Second
)

// Collectors finds the host-side collector of a sandbox's background
// processes' output (*procs.Manager).
type Collectors interface {
	Get(id string) (*procs.Collector, bool)
}

// allowedSignals are the signals a caller may send to a process.
var allowedSignals = map[string]bool{
	"SIGTERM": true, "SIGKILL": true, "SIGINT": true, "SIGHUP": true, "SIGQUIT": true,
	"SIGUSR1": true, "SIGUSR2": true, "SIGSTOP": true, "SIGCONT": true,
}

// processCall admits a call into a team's sandbox that has a collector,
// and runs it with the agent's process service and the collector.
func (s *Service) processCall(ctx context.Context, team, id string, call func(agentv1connect.ProcessServiceClient, *procs.Collector) error) error {
	if s.procs == nil {
		return fmt.Errorf("background processes are not collected by this daemon: %w", errdefs.ErrUnsupported)
	}
	agent, release, err := s.sessions.Acquire(ctx, team, id)
	if err != nil {
		return err
	}
	defer release()
	col, ok := s.procs.Get(id)
	if !ok {
		return ErrNotCollected(id)
	}
	return call(agent.Process(), col)
}

// ErrNotCollected says a sandbox's process output has no collector (yet).
func ErrNotCollected(id string) error {
	return fmt.Errorf("sandbox %s: its process output is not being collected (is the daemon restarting?): %w", id, errdefs.ErrUnavailable)
}

// StartProcess starts a background process in a team's sandbox; its
// output is collected on the host (see procs).
func (s *Service) StartProcess(ctx context.Context, team, id string, req client.StartProcessRequest) (client.ProcessInfo, error) {
	if err := ValidateExec(&req.ExecRequest); err != nil {
		return client.ProcessInfo{}, err
	}
	if req.Turn {
		return client.ProcessInfo{}, fmt.Errorf("turn does not apply to a background process: take a turn with POST /sandboxes/{id}/turns: %w", errdefs.ErrInvalid)
	}
	var info client.ProcessInfo
	err := s.processCall(ctx, team, id, func(agent agentv1connect.ProcessServiceClient, col *procs.Collector) error {
		res, err := agent.Start(ctx, connect.NewRequest(&agentv1.StartRequest{
			Tag: req.Tag,
			Exec: &agentv1.ExecRequest{
				Argv: req.Cmd, ShellCommand: req.Command, Env: req.Env, Cwd: req.Cwd,
				User: req.User, Stdin: req.Stdin, TimeoutMs: req.TimeoutMs,
			},
		}))
		if err != nil {
			return fmt.Errorf("sandbox agent: %w", err)
		}
		p := res.Msg.GetProcess()
		col.WaitKnown(ctx, p.GetPid(), p.GetSeq(), knownWait)
		info = client.ProcessInfo{
			PID: p.GetPid(), Tag: p.GetTag(), Cmd: p.GetArgv(), Cwd: p.GetCwd(), User: p.GetUser(),
			State: "running", StartedAt: time.UnixMilli(p.GetStartedAtUnixMs()).UTC(),
		}
		if got, err := col.Get(ctx, strconv.Itoa(int(p.GetPid()))); err == nil && got.Seq == p.GetSeq() {
			info = ProcessInfo(got)
		}
		return nil
	})
	return info, err
}

// SendInput writes to a process's stdin (at most MaxStdin bytes at once).
func (s *Service) SendInput(ctx context.Context, team, id, ref string, data []byte) error {
	if len(data) > MaxStdin {
		return fmt.Errorf("stdin of %d bytes is larger than %d bytes; send it in parts: %w", len(data), MaxStdin, errdefs.ErrInvalid)
	}
	return s.processCall(ctx, team, id, func(agent agentv1connect.ProcessServiceClient, _ *procs.Collector) error {
		_, err := agent.SendInput(ctx, connect.NewRequest(&agentv1.SendInputRequest{Process: refOf(ref), Data: data}))
		return agentErr(err)
	})
}

// CloseInput closes a process's stdin.
func (s *Service) CloseInput(ctx context.Context, team, id, ref string) error {
	return s.processCall(ctx, team, id, func(agent agentv1connect.ProcessServiceClient, _ *procs.Collector) error {
		_, err := agent.CloseStdin(ctx, connect.NewRequest(&agentv1.CloseStdinRequest{Process: refOf(ref)}))
		return agentErr(err)
	})
}

// Signal sends a signal (a name, with or without SIG) to a process.
func (s *Service) Signal(ctx context.Context, team, id, ref, signal string) error {
	sig := strings.ToUpper(strings.TrimSpace(signal))
	if sig != "" && !strings.HasPrefix(sig, "SIG") {
		sig = "SIG" + sig
	}
	if !allowedSignals[sig] {
		return fmt.Errorf("signal %q is not allowed: use one of SIGTERM, SIGKILL, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGSTOP, SIGCONT: %w", signal, errdefs.ErrInvalid)
	}
	return s.processCall(ctx, team, id, func(agent agentv1connect.ProcessServiceClient, _ *procs.Collector) error {
		_, err := agent.SendSignal(ctx, connect.NewRequest(&agentv1.SendSignalRequest{Process: refOf(ref), Signal: sig}))
		return agentErr(err)
	})
}

func agentErr(err error) error {
	if err != nil {
		return fmt.Errorf("sandbox agent: %w", err)
	}
	return nil
}

// refOf names a process to the agent: a number is a pid, anything else a tag.
func refOf(ref string) *agentv1.ProcessRef {
	if n, err := strconv.ParseInt(ref, 10, 32); err == nil && n > 0 {
		return &agentv1.ProcessRef{Pid: int32(n)}
	}
	return &agentv1.ProcessRef{Tag: ref}
}

// ProcessInfo is a collected process as the API shows it.
func ProcessInfo(p procs.Process) client.ProcessInfo {
	info := client.ProcessInfo{
		PID: p.PID, Tag: p.Tag, Cmd: p.Argv, Cwd: p.Cwd, User: p.User, State: "running",
		StartedAt:   p.StartedAt.UTC(),
		StdoutBytes: p.StdoutEnd, StderrBytes: p.StderrEnd,
		StdoutStart: p.StdoutStart, StderrStart: p.StderrStart,
	}
	if info.Cmd == nil {
		info.Cmd = []string{}
	}
	if p.Exit != nil {
		code := p.Exit.ExitCode
		ended := p.EndedAt.UTC()
		info.State, info.ExitCode, info.EndedAt = "exited", &code, &ended
		info.Signal, info.TimedOut, info.Error = p.Exit.Signal, p.Exit.TimedOut, p.Exit.Error
	}
	return info
}
