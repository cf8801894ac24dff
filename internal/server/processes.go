package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"

	agentv1 "github.com/warrenhq/warren/api/gen/warren/agent/v1"
	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/agentconn"
	"github.com/warrenhq/warren/internal/commands"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/procs"
)

const (
	// maxStdinBody bounds one stdin write (the agent's own bound).
	maxStdinBody = 4 << 20
	// knownWait bounds how long a start waits for the host's collector to
	// hear of the new process, so that list and output see it at once.
	knownWait = 2 * time.Second
)

// allowedSignals are the signals a client may send to a process.
var allowedSignals = map[string]bool{
	"SIGTERM": true, "SIGKILL": true, "SIGINT": true, "SIGHUP": true, "SIGQUIT": true,
	"SIGUSR1": true, "SIGUSR2": true, "SIGSTOP": true, "SIGCONT": true,
}

// processes admits a call into a team's running sandbox and returns its
// agent, its output collector and the call's release.
func (s *Server) processes(r *http.Request) (*agentconn.Conn, *procs.Collector, func(), error) {
	id := r.PathValue("id")
	agent, release, err := s.deps.Sessions.Acquire(r.Context(), teamOf(r), id)
	if err != nil {
		return nil, nil, nil, err
	}
	col, ok := s.deps.Procs.Get(id)
	if !ok {
		release()
		return nil, nil, nil, errNotCollected(id)
	}
	return agent, col, release, nil
}

// processOutputs returns the output collector of a team's running sandbox.
// It counts no call in flight: following a process's output may last as
// long as the process and must not keep the sandbox from pausing.
func (s *Server) processOutputs(r *http.Request) (*procs.Collector, error) {
	id := r.PathValue("id")
	if _, err := s.deps.Sessions.Agent(r.Context(), teamOf(r), id); err != nil {
		return nil, err
	}
	col, ok := s.deps.Procs.Get(id)
	if !ok {
		return nil, errNotCollected(id)
	}
	return col, nil
}

func errNotCollected(id string) error {
	return fmt.Errorf("sandbox %s: its process output is not being collected (is the daemon restarting?): %w", id, errdefs.ErrUnavailable)
}

// refOf names a process to the agent: a number is a pid, anything else a tag.
func refOf(ref string) *agentv1.ProcessRef {
	if n, err := strconv.ParseInt(ref, 10, 32); err == nil && n > 0 {
		return &agentv1.ProcessRef{Pid: int32(n)}
	}
	return &agentv1.ProcessRef{Tag: ref}
}

func (s *Server) startProcess(w http.ResponseWriter, r *http.Request) {
	var req client.StartProcessRequest
	if err := decodeJSON(w, r, &req); err != nil {
		writeError(w, r, err)
		return
	}
	if err := commands.ValidateExec(&req.ExecRequest); err != nil {
		writeError(w, r, err)
		return
	}
	if req.Turn {
		writeError(w, r, fmt.Errorf("turn does not apply to a background process: take a turn with POST /sandboxes/{id}/turns: %w", errdefs.ErrInvalid))
		return
	}
	agent, col, release, err := s.processes(r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	defer release()
	res, err := agent.Process().Start(r.Context(), connect.NewRequest(&agentv1.StartRequest{
		Tag: req.Tag,
		Exec: &agentv1.ExecRequest{
			Argv: req.Cmd, ShellCommand: req.Command, Env: req.Env, Cwd: req.Cwd,
			User: req.User, Stdin: req.Stdin, TimeoutMs: req.TimeoutMs,
		},
	}))
	if err != nil {
		writeError(w, r, fmt.Errorf("sandbox agent: %w", err))
		return
	}
	p := res.Msg.GetProcess()
	col.WaitKnown(r.Context(), p.GetPid(), p.GetSeq(), knownWait)
	info := client.ProcessInfo{
		PID: p.GetPid(), Tag: p.GetTag(), Cmd: p.GetArgv(), Cwd: p.GetCwd(), User: p.GetUser(),
		State: "running", StartedAt: time.UnixMilli(p.GetStartedAtUnixMs()).UTC(),
	}
	if got, err := col.Get(r.Context(), strconv.Itoa(int(p.GetPid()))); err == nil && got.Seq == p.GetSeq() {
		info = processInfo(got)
	}
	writeJSON(w, http.StatusCreated, info)
}

func processInfo(p procs.Process) client.ProcessInfo {
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

func (s *Server) listProcesses(w http.ResponseWriter, r *http.Request) {
	col, err := s.processOutputs(r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	list := col.List(r.Context())
	out := make([]client.ProcessInfo, 0, len(list))
	for _, p := range list {
		out = append(out, processInfo(p))
	}
	writeJSON(w, http.StatusOK, out)
}

func queryOffset(r *http.Request, name string, def uint64) (uint64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s=%q is not a byte offset: %w", name, v, errdefs.ErrInvalid)
	}
	return n, nil
}

// processOutput replays a process's output from the host's ring and, with
// ?follow=true, streams it live until the process exits, as NDJSON.
func (s *Server) processOutput(w http.ResponseWriter, r *http.Request) {
	col, err := s.processOutputs(r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	from, err := queryOffset(r, "from", 0)
	if err != nil {
		writeError(w, r, err)
		return
	}
	outFrom, err := queryOffset(r, "stdoutFrom", from)
	if err != nil {
		writeError(w, r, err)
		return
	}
	errFrom, err := queryOffset(r, "stderrFrom", from)
	if err != nil {
		writeError(w, r, err)
		return
	}
	follow := r.URL.Query().Get("follow") == "true"
	p, err := col.Get(r.Context(), r.PathValue("ref"))
	if err != nil {
		writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	enc := json.NewEncoder(w)
	sawExit := false
	err = col.Follow(r.Context(), p, outFrom, errFrom, follow, func(ev procs.Event) error {
		out := client.ProcessEvent{Type: ev.Stream, Offset: ev.Offset, Data: ev.Data}
		if ev.Exit != nil {
			code := ev.Exit.ExitCode
			sawExit = true
			out = client.ProcessEvent{Type: "exit", ExitCode: &code, Signal: ev.Exit.Signal, TimedOut: ev.Exit.TimedOut, Error: ev.Exit.Error}
		}
		if err := enc.Encode(out); err != nil {
			return err
		}
		if flusher != nil {
			flusher.Flush()
		}
		return nil
	})
	if r.Context().Err() != nil {
		return // the client went away; the process keeps running
	}
	switch {
	case err != nil:
		_ = enc.Encode(client.ProcessEvent{Type: "error", Error: "reading the process's output failed: " + messageOf(err)})
	case follow && !sawExit:
		_ = enc.Encode(client.ProcessEvent{Type: "error", Error: "the process is gone: its sandbox restarted (a rollback restarts every process)"})
	}
}

func (s *Server) processStdin(w http.ResponseWriter, r *http.Request) {
	agent, _, release, err := s.processes(r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	defer release()
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxStdinBody))
	if err != nil {
		writeError(w, r, fmt.Errorf("stdin body is larger than %d bytes; send it in parts: %w", maxStdinBody, errTooLarge))
		return
	}
	if _, err := agent.Process().SendInput(r.Context(), connect.NewRequest(&agentv1.SendInputRequest{Process: refOf(r.PathValue("ref")), Data: data})); err != nil {
		writeError(w, r, fmt.Errorf("sandbox agent: %w", err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) processCloseStdin(w http.ResponseWriter, r *http.Request) {
	agent, _, release, err := s.processes(r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	defer release()
	if _, err := agent.Process().CloseStdin(r.Context(), connect.NewRequest(&agentv1.CloseStdinRequest{Process: refOf(r.PathValue("ref"))})); err != nil {
		writeError(w, r, fmt.Errorf("sandbox agent: %w", err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) processSignal(w http.ResponseWriter, r *http.Request) {
	var req client.SignalRequest
	if err := decodeJSON(w, r, &req); err != nil {
		writeError(w, r, err)
		return
	}
	sig := strings.ToUpper(strings.TrimSpace(req.Signal))
	if sig != "" && !strings.HasPrefix(sig, "SIG") {
		sig = "SIG" + sig
	}
	if !allowedSignals[sig] {
		writeError(w, r, fmt.Errorf("signal %q is not allowed: use one of SIGTERM, SIGKILL, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGSTOP, SIGCONT: %w", req.Signal, errdefs.ErrInvalid))
		return
	}
	agent, _, release, err := s.processes(r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	defer release()
	if _, err := agent.Process().SendSignal(r.Context(), connect.NewRequest(&agentv1.SendSignalRequest{Process: refOf(r.PathValue("ref")), Signal: sig})); err != nil {
		writeError(w, r, fmt.Errorf("sandbox agent: %w", err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
