package commands

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	agentv1 "github.com/warrenhq/warren/api/gen/warren/agent/v1"
	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/procs"
	"github.com/warrenhq/warren/internal/store"
)

// toolLogSeq numbers tool calls as processes of a sandbox's log, far above
// the agent's own process numbers.
var toolLogSeq atomic.Uint64

// maxToolCallID bounds a tool call's id.
const maxToolCallID = 256

// CallTool runs one tool call in a team's sandbox, records it, and takes
// a turn snapshot after it when the call or the sandbox asks for one.
// progress, if set, hears the call's output as it comes (bash's); an
// error from it (the caller went away) ends the call.
func (s *Service) CallTool(ctx context.Context, team, id, name string, req client.ToolCall, progress func([]byte) error) (client.ToolResult, error) {
	params, err := toolParams(req)
	if err != nil {
		return client.ToolResult{}, err
	}
	rec, err := s.sessions.Get(ctx, team, id)
	if err != nil {
		return client.ToolResult{}, err
	}
	agent, release, err := s.sessions.Acquire(ctx, team, id)
	if err != nil {
		return client.ToolResult{}, err
	}
	defer release()
	start := time.Now()
	stream, err := agent.Tools().Call(ctx, connect.NewRequest(&agentv1.CallRequest{
		Tool: name, Params: params, User: req.User, Cwd: req.Cwd,
	}))
	if err != nil {
		return client.ToolResult{}, s.agentError(ctx, team, id, start, err)
	}
	defer stream.Close()
	log := s.toolLog(id, name, req.ToolCallID)
	defer log.end()
	result, err := s.toolResult(stream, log, progress)
	if err != nil {
		if why := s.sessions.StoppedDuringCommand(ctx, team, id, start); why != nil {
			err = why
		}
		return client.ToolResult{}, fmt.Errorf("tool %s: %w", name, err)
	}
	out := client.ToolResult{
		ToolCallID: req.ToolCallID,
		Content:    result.GetContent(),
		IsError:    result.GetIsError(),
		ExitCode:   result.ExitCode,
		DurationMs: result.GetDurationMs(),
	}
	call := store.ToolCall{
		SandboxID: id, Team: rec.Team, ToolCallID: req.ToolCallID, Tool: name, At: start,
		ParamsDigest: digest(params), ParamsBytes: len(params), ResultBytes: len(out.Content),
		Duration: time.Duration(out.DurationMs) * time.Millisecond, IsError: out.IsError, ExitCode: out.ExitCode,
	}
	if req.Turn || rec.ToolSnapshots {
		release() // a turn waits for running calls; this one is over
		snap, err := s.sessions.Turn(ctx, team, id)
		if err != nil {
			out.SnapshotError = "turn snapshot failed: " + MessageOf(err)
		} else {
			out.SnapshotID, call.SnapshotID, call.Turn = snap.ID, snap.ID, snap.Turn
		}
	}
	log.exit = procs.Exit{}
	if out.ExitCode != nil {
		log.exit.ExitCode = *out.ExitCode
	}
	s.sessions.RecordToolCall(ctx, call)
	s.logs.Event(id, toolLogLevel(out), toolLogLine(name, out))
	return out, nil
}

// toolParams checks a tool call's request and returns its params, {} when
// none are given.
func toolParams(req client.ToolCall) ([]byte, error) {
	if len(req.ToolCallID) > maxToolCallID {
		return nil, fmt.Errorf("toolCallID is longer than %d bytes: %w", maxToolCallID, errdefs.ErrInvalid)
	}
	params := bytes.TrimSpace(req.Params)
	if len(params) == 0 || bytes.Equal(params, []byte("null")) {
		return []byte("{}"), nil
	}
	if params[0] != '{' {
		return nil, fmt.Errorf("params must be a JSON object: %w", errdefs.ErrInvalid)
	}
	return params, nil
}

// toolResult reads a tool call's stream to its result, passing progress on
// and into the sandbox's log.
func (s *Service) toolResult(stream *connect.ServerStreamForClient[agentv1.CallEvent], log *toolLog, progress func([]byte) error) (*agentv1.ToolResult, error) {
	for stream.Receive() {
		msg := stream.Msg()
		if res := msg.GetResult(); res != nil {
			return res, nil
		}
		p := msg.GetProgress()
		if p == nil {
			continue
		}
		log.output(p.GetData())
		if progress != nil {
			if err := progress(p.GetData()); err != nil {
				return nil, err
			}
		}
	}
	if err := stream.Err(); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("the sandbox's agent ended the call without a result: %w", errdefs.ErrUnavailable)
}

// toolLog writes a tool call's output into the sandbox's log as a process
// of its own: a sequence number of its own keeps concurrent calls' lines
// apart. Nothing is logged for a call without output but its result line.
type toolLog struct {
	logs    Log
	id      string
	proc    procs.ProcessID
	argv    []string
	started bool
	off     uint64
	exit    procs.Exit
}

func (s *Service) toolLog(id, name, callID string) *toolLog {
	return &toolLog{
		logs: s.logs, id: id,
		proc: procs.ProcessID{Seq: 1<<62 | toolLogSeq.Add(1), Tag: "tool:" + name},
		argv: []string{"tool " + name, callID},
		exit: procs.Exit{Error: "the call ended without a result"},
	}
}

// output logs bash's output: the sandbox's output too.
func (l *toolLog) output(data []byte) {
	if !l.started {
		l.started = true
		l.logs.Started(l.id, l.proc, l.argv)
	}
	l.logs.Output(l.id, l.proc, false, l.off, data)
	l.off += uint64(len(data))
}

func (l *toolLog) end() {
	if l.started {
		l.logs.Exited(l.id, l.proc, l.exit)
	}
}

func digest(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func toolLogLevel(res client.ToolResult) string {
	if res.IsError {
		return "warn"
	}
	return "info"
}

// toolLogLine is a tool call as a line of the sandbox's log.
func toolLogLine(name string, res client.ToolResult) string {
	verdict := "ok"
	if res.IsError {
		verdict = "error"
	}
	line := fmt.Sprintf("tool %s: %s in %d ms", name, verdict, res.DurationMs)
	if res.ToolCallID != "" {
		line += " (call " + res.ToolCallID + ")"
	}
	if res.SnapshotID != "" {
		line += ", snapshot " + res.SnapshotID
	}
	return line
}
