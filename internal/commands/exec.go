package commands

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"connectrpc.com/connect"

	agentv1 "github.com/warrenhq/warren/api/gen/warren/agent/v1"
	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/procs"
)

const (
	maxArgs        = 4096
	maxCommandSize = 256 << 10
	// maxOutputLimit bounds what a request may ask the agent to send back.
	maxOutputLimit = 1 << 30
)

// ValidateExec checks a command before anything runs.
func ValidateExec(req *client.ExecRequest) error {
	switch {
	case len(req.Cmd) == 0 && req.Command == "":
		return fmt.Errorf("give either cmd (an argv) or command (a shell command): %w", errdefs.ErrInvalid)
	case len(req.Cmd) > 0 && req.Command != "":
		return fmt.Errorf("give cmd or command, not both: %w", errdefs.ErrInvalid)
	case len(req.Cmd) > maxArgs:
		return fmt.Errorf("cmd has %d arguments, at most %d allowed: %w", len(req.Cmd), maxArgs, errdefs.ErrInvalid)
	case len(req.Command) > maxCommandSize:
		return fmt.Errorf("command is longer than %d bytes: %w", maxCommandSize, errdefs.ErrInvalid)
	case len(req.Cmd) > 0 && req.Cmd[0] == "":
		return fmt.Errorf("cmd[0] is empty: %w", errdefs.ErrInvalid)
	case req.OutputLimit > maxOutputLimit:
		return fmt.Errorf("outputLimit is above %d bytes: %w", maxOutputLimit, errdefs.ErrInvalid)
	}
	size := len(req.Command)
	for _, a := range req.Cmd {
		size += len(a)
		if strings.IndexByte(a, 0) >= 0 {
			return fmt.Errorf("cmd holds a NUL byte: %w", errdefs.ErrInvalid)
		}
	}
	if size > maxCommandSize {
		return fmt.Errorf("cmd is longer than %d bytes: %w", maxCommandSize, errdefs.ErrInvalid)
	}
	return nil
}

// execCall is one admitted command's agent stream.
type execCall struct {
	stream  *connect.ServerStreamForClient[agentv1.ExecEvent]
	release func() // the admission's; harmless to call twice
	began   time.Time
	limit   uint64
	logged  func(*agentv1.ExecEvent)
}

// start validates, admits and starts a command.
func (s *Service) start(ctx context.Context, team, id string, req *client.ExecRequest) (*execCall, error) {
	if err := ValidateExec(req); err != nil {
		return nil, err
	}
	agent, release, err := s.sessions.Acquire(ctx, team, id)
	if err != nil {
		return nil, err
	}
	limit := req.OutputLimit
	if limit == 0 {
		limit = s.outputLimit
	}
	began := time.Now()
	stream, err := agent.Process().Exec(ctx, connect.NewRequest(&agentv1.ExecRequest{
		Argv:             req.Cmd,
		ShellCommand:     req.Command,
		Env:              req.Env,
		Cwd:              req.Cwd,
		User:             req.User,
		Stdin:            req.Stdin,
		TimeoutMs:        req.TimeoutMs,
		OutputLimitBytes: limit,
	}))
	if err != nil {
		release()
		return nil, s.agentError(ctx, team, id, began, err)
	}
	return &execCall{stream: stream, release: release, began: began, limit: limit, logged: s.execLog(id, req)}, nil
}

func (c *execCall) close() {
	c.release()
	_ = c.stream.Close()
}

// Exec runs a command and passes each of its events to emit as it comes:
// start, stdout, stderr, then exit (which, with req.Turn, names the turn
// snapshot taken after it). An error before the first event is returned;
// a stream that breaks later ends with an "error" event. An error from
// emit (the caller went away) ends the call; the agent kills the command.
func (s *Service) Exec(ctx context.Context, team, id string, req client.ExecRequest, emit func(client.ExecEvent) error) error {
	call, err := s.start(ctx, team, id, &req)
	if err != nil {
		return err
	}
	defer call.close()
	sawExit := false
	for call.stream.Receive() {
		msg := call.stream.Msg()
		ev, ok := eventOf(msg)
		if !ok {
			call.logged(msg)
			continue
		}
		if ev.Type == "exit" {
			sawExit = true
			call.release() // a turn waits for running commands; this one is over
			if req.Turn {
				ev.SnapshotID, ev.Error = s.turnAfter(ctx, team, id, ev.Error)
			}
		}
		err := emit(ev)
		call.logged(msg) // after the caller has the event: the log is not on its path
		if err != nil {
			return err
		}
	}
	if sawExit {
		return nil
	}
	// The stream broke (the agent or the sandbox went away): say so
	// in-band, since events have been sent.
	msg := "the sandbox's agent went away before the command finished"
	if why := s.sessions.StoppedDuringCommand(ctx, team, id, call.began); why != nil {
		msg = MessageOf(why)
	} else if err := call.stream.Err(); err != nil {
		msg += ": " + MessageOf(err)
	}
	return emit(client.ExecEvent{Type: "error", Error: msg})
}

// ExecWait runs a command and answers once with its whole output (capped
// at the request's output limit) and, with req.Turn, the turn snapshot
// taken after it.
func (s *Service) ExecWait(ctx context.Context, team, id string, req client.ExecRequest) (client.ExecResult, error) {
	call, err := s.start(ctx, team, id, &req)
	if err != nil {
		return client.ExecResult{}, err
	}
	defer call.close()
	// The log is written once the result is in hand, as when streaming:
	// it is not on the command's round trip. Past the output cap (the
	// agent is untrusted) events are logged as they come instead of held.
	var held []*agentv1.ExecEvent
	var heldBytes uint64
	flush := func() {
		for _, ev := range held {
			call.logged(ev)
		}
		held = nil
	}
	defer flush()
	res, err := collect(call.stream, call.limit, func(ev *agentv1.ExecEvent) {
		if ev.GetExited() != nil {
			// The command is over: its write-back (for a turn snapshot
			// that may follow) starts now, not once the answer is written.
			call.release()
		}
		if heldBytes > call.limit {
			flush()
			call.logged(ev)
			return
		}
		held = append(held, ev)
		heldBytes += uint64(len(ev.GetOutput().GetData()))
	})
	if err != nil {
		return client.ExecResult{}, s.agentError(ctx, team, id, call.began, err)
	}
	if req.Turn {
		res.SnapshotID, res.Error = s.turnAfter(ctx, team, id, res.Error)
	}
	return res, nil
}

// turnAfter takes the turn snapshot a command asked for. A failure is
// reported in the result's error (the command itself did run).
func (s *Service) turnAfter(ctx context.Context, team, id, cmdErr string) (string, string) {
	res, err := s.sessions.Turn(ctx, team, id)
	if err != nil {
		msg := "turn snapshot failed: " + MessageOf(err)
		if cmdErr != "" {
			msg = cmdErr + "; " + msg
		}
		return "", msg
	}
	return res.ID, cmdErr
}

// execLog returns what copies an exec's events into the sandbox's log (a
// foreground command is not one of the agent's background processes, whose
// output the collector logs).
func (s *Service) execLog(id string, req *client.ExecRequest) func(*agentv1.ExecEvent) {
	var p procs.ProcessID
	return func(msg *agentv1.ExecEvent) {
		switch {
		case msg.GetStarted() != nil:
			p.PID = msg.GetStarted().GetPid()
			argv := req.Cmd
			if req.Command != "" {
				argv = []string{req.Command}
			}
			s.logs.Started(id, p, argv)
		case msg.GetOutput() != nil:
			out := msg.GetOutput()
			s.logs.Output(id, p, out.GetStream() == agentv1.Stream_STREAM_STDERR, 0, out.GetData())
		case msg.GetExited() != nil:
			ex := msg.GetExited()
			s.logs.Exited(id, p, procs.Exit{ExitCode: ex.GetExitCode(), Signal: ex.GetSignal(), TimedOut: ex.GetTimedOut(), Error: ex.GetError()})
		}
	}
}

// collect reads a whole exec stream into one result, capping the output
// again (the agent is untrusted). Each event is also passed to observe.
func collect(stream *connect.ServerStreamForClient[agentv1.ExecEvent], limit uint64, observe func(*agentv1.ExecEvent)) (client.ExecResult, error) {
	var res client.ExecResult
	var stdout, stderr strings.Builder
	sawExit := false
	for stream.Receive() {
		msg := stream.Msg()
		observe(msg)
		switch {
		case msg.GetStarted() != nil:
			res.PID = msg.GetStarted().GetPid()
		case msg.GetOutput() != nil:
			out := msg.GetOutput()
			// The agent caps output, but it is untrusted: cap again here.
			if uint64(stdout.Len()+stderr.Len()+len(out.GetData())) > limit {
				res.OutputTruncated = true
				continue
			}
			if out.GetStream() == agentv1.Stream_STREAM_STDERR {
				stderr.Write(out.GetData())
			} else {
				stdout.Write(out.GetData())
			}
		case msg.GetExited() != nil:
			ex := msg.GetExited()
			sawExit = true
			res.ExitCode = ex.GetExitCode()
			res.Signal = ex.GetSignal()
			res.TimedOut = ex.GetTimedOut()
			res.OutputTruncated = res.OutputTruncated || ex.GetOutputTruncated()
			res.Error = ex.GetError()
		}
	}
	if !sawExit {
		err := stream.Err()
		if err == nil {
			err = fmt.Errorf("the sandbox's agent ended the stream without an exit status: %w", errdefs.ErrUnavailable)
		}
		return client.ExecResult{}, err
	}
	res.Stdout, res.Stderr = stdout.String(), stderr.String()
	return res, nil
}

func eventOf(msg *agentv1.ExecEvent) (client.ExecEvent, bool) {
	switch {
	case msg.GetStarted() != nil:
		return client.ExecEvent{Type: "start", PID: msg.GetStarted().GetPid()}, true
	case msg.GetOutput() != nil:
		t := "stdout"
		if msg.GetOutput().GetStream() == agentv1.Stream_STREAM_STDERR {
			t = "stderr"
		}
		return client.ExecEvent{Type: t, Data: msg.GetOutput().GetData()}, true
	case msg.GetExited() != nil:
		ex := msg.GetExited()
		code := ex.GetExitCode()
		return client.ExecEvent{
			Type:            "exit",
			ExitCode:        &code,
			Signal:          ex.GetSignal(),
			TimedOut:        ex.GetTimedOut(),
			OutputTruncated: ex.GetOutputTruncated(),
			Error:           ex.GetError(),
		}, true
	}
	return client.ExecEvent{}, false
}

// MessageOf is the message a user sees: an agent's own message without
// Connect's code prefix, else the error's text.
func MessageOf(err error) string {
	var ce *connect.Error
	if errors.As(err, &ce) && !errdefs.IsNotFound(err) {
		return ce.Message()
	}
	return err.Error()
}
