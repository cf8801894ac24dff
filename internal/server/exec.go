package server

import (
	"fmt"
	"net/http"
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

func validateExec(req *client.ExecRequest) error {
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

// exec runs a command in a sandbox and streams its events as NDJSON, or with
// ?wait=true answers once with the whole output.
func (s *Server) exec(w http.ResponseWriter, r *http.Request) {
	var req client.ExecRequest
	if err := decodeJSON(w, r, &req); err != nil {
		writeError(w, r, err)
		return
	}
	if err := validateExec(&req); err != nil {
		writeError(w, r, err)
		return
	}
	id := r.PathValue("id")
	agent, done, err := s.deps.Sessions.Acquire(r.Context(), teamOf(r), id)
	if err != nil {
		writeError(w, r, err)
		return
	}
	defer done()
	began := time.Now()
	limit := req.OutputLimit
	if limit == 0 {
		limit = s.deps.OutputLimit
	}
	stream, err := agent.Process().Exec(r.Context(), connect.NewRequest(&agentv1.ExecRequest{
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
		writeError(w, r, s.agentError(r, id, began, err))
		return
	}
	defer stream.Close()
	logged := s.execLog(id, &req)

	if r.URL.Query().Get("wait") == "true" {
		// The log is written once the client has its answer, as when
		// streaming: it is not on the command's round trip.
		// Past the output cap (the agent is untrusted) events are logged
		// as they come instead of held.
		var held []*agentv1.ExecEvent
		var heldBytes uint64
		flush := func() {
			for _, ev := range held {
				logged(ev)
			}
			held = nil
		}
		defer flush()
		res, err := collect(stream, limit, func(ev *agentv1.ExecEvent) {
			if ev.GetExited() != nil {
				// The command is over: its write-back (for a turn
				// snapshot that may follow) starts now, not once the
				// answer is written.
				done()
			}
			if heldBytes > limit {
				flush()
				logged(ev)
				return
			}
			held = append(held, ev)
			heldBytes += uint64(len(ev.GetOutput().GetData()))
		})
		if err != nil {
			writeError(w, r, s.agentError(r, id, began, err))
			return
		}
		if req.Turn {
			res.SnapshotID, res.Error = s.turnAfter(r, id, res.Error)
		}
		writeJSON(w, http.StatusOK, res)
		return
	}

	enc, flusher := startNDJSON(w)
	sawExit := false
	for stream.Receive() {
		msg := stream.Msg()
		ev, ok := eventOf(msg)
		if !ok {
			logged(msg)
			continue
		}
		if ev.Type == "exit" {
			sawExit = true
			done()
			if req.Turn {
				ev.SnapshotID, ev.Error = s.turnAfter(r, id, ev.Error)
			}
		}
		if err := enc.Encode(ev); err != nil {
			logged(msg)
			return // the client went away; the agent kills the command
		}
		if flusher != nil {
			flusher.Flush()
		}
		logged(msg) // after the client has the event: the log is not on its path
	}
	if !sawExit {
		// The stream broke (the agent or the sandbox went away): say so
		// in-band, since the status line has been sent.
		msg := "the sandbox's agent went away before the command finished"
		if why := s.deps.Sessions.StoppedDuringCommand(r.Context(), teamOf(r), id, began); why != nil {
			msg = messageOf(why)
		} else if err := stream.Err(); err != nil {
			msg += ": " + messageOf(err)
		}
		_ = enc.Encode(client.ExecEvent{Type: "error", Error: msg})
	}
}

// agentError is a command's broken agent call (begun at began): how the
// sandbox stopped running if it did meanwhile (its timeout killed it, say),
// or was restarted by a rollback, else the agent's error.
func (s *Server) agentError(r *http.Request, id string, began time.Time, err error) error {
	if why := s.deps.Sessions.StoppedDuringCommand(r.Context(), teamOf(r), id, began); why != nil {
		return why
	}
	return fmt.Errorf("sandbox agent: %w", err)
}

// turnAfter takes the turn snapshot an exec asked for. A failure is
// reported in the result's error (the command itself did run).
func (s *Server) turnAfter(r *http.Request, id, cmdErr string) (string, string) {
	res, err := s.deps.Sessions.Turn(r.Context(), teamOf(r), id)
	if err != nil {
		msg := "turn snapshot failed: " + messageOf(err)
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
func (s *Server) execLog(id string, req *client.ExecRequest) func(*agentv1.ExecEvent) {
	var p procs.ProcessID
	return func(msg *agentv1.ExecEvent) {
		switch {
		case msg.GetStarted() != nil:
			p.PID = msg.GetStarted().GetPid()
			argv := req.Cmd
			if req.Command != "" {
				argv = []string{req.Command}
			}
			s.deps.Logs.Started(id, p, argv)
		case msg.GetOutput() != nil:
			out := msg.GetOutput()
			s.deps.Logs.Output(id, p, out.GetStream() == agentv1.Stream_STREAM_STDERR, 0, out.GetData())
		case msg.GetExited() != nil:
			ex := msg.GetExited()
			s.deps.Logs.Exited(id, p, procs.Exit{ExitCode: ex.GetExitCode(), Signal: ex.GetSignal(), TimedOut: ex.GetTimedOut(), Error: ex.GetError()})
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
