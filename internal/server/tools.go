package server

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
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

// maxToolBody bounds a tool call's body: a write or an apply_patch carries
// a whole file.
const maxToolBody = 32 << 20

// callTool serves POST /sandboxes/{id}/tools/{name}: one tool call run by
// the sandbox's agent, recorded, and followed by a turn snapshot when the
// call or the sandbox asks for one. With ?stream=true the answer is NDJSON:
// "progress" events (bash's output as it comes), then one "result".
func (s *Server) callTool(w http.ResponseWriter, r *http.Request) {
	id, name := r.PathValue("id"), r.PathValue("name")
	var req client.ToolCall
	if err := decodeJSONLimit(w, r, &req, maxToolBody); err != nil {
		writeError(w, r, err)
		return
	}
	params := bytes.TrimSpace(req.Params)
	if len(params) == 0 || bytes.Equal(params, []byte("null")) {
		params = []byte("{}")
	}
	if params[0] != '{' {
		writeError(w, r, fmt.Errorf("params must be a JSON object: %w", errdefs.ErrInvalid))
		return
	}
	if len(req.ToolCallID) > 256 {
		writeError(w, r, fmt.Errorf("toolCallID is longer than 256 bytes: %w", errdefs.ErrInvalid))
		return
	}
	rec, err := s.deps.Sessions.Get(r.Context(), teamOf(r), id)
	if err != nil {
		writeError(w, r, err)
		return
	}
	agent, done, err := s.deps.Sessions.Acquire(r.Context(), teamOf(r), id)
	if err != nil {
		writeError(w, r, err)
		return
	}
	defer done()
	start := time.Now()
	stream, err := agent.Tools().Call(r.Context(), connect.NewRequest(&agentv1.CallRequest{
		Tool: name, Params: params, User: req.User, Cwd: req.Cwd,
	}))
	if err != nil {
		writeError(w, r, s.agentError(r, id, start, err))
		return
	}
	defer stream.Close()

	streaming := r.URL.Query().Get("stream") == "true"
	var enc *json.Encoder
	var flusher http.Flusher
	var result *agentv1.ToolResult
	// The call's output goes into the sandbox's log as a process of its
	// own: a sequence number of its own keeps concurrent calls' lines apart.
	toolProc := procs.ProcessID{Seq: 1<<62 | toolLogSeq.Add(1), Tag: "tool:" + name}
	var logged bool
	var logOff uint64
	exit := procs.Exit{Error: "the call ended without a result"}
	defer func() {
		if logged {
			s.deps.Logs.Exited(id, toolProc, exit)
		}
	}()
	for stream.Receive() {
		msg := stream.Msg()
		if res := msg.GetResult(); res != nil {
			result = res
			break
		}
		p := msg.GetProgress()
		if p == nil {
			continue
		}
		// bash's output is the sandbox's output too: into its log.
		if !logged {
			logged = true
			s.deps.Logs.Started(id, toolProc, []string{"tool " + name, req.ToolCallID})
		}
		s.deps.Logs.Output(id, toolProc, false, logOff, p.GetData())
		logOff += uint64(len(p.GetData()))
		if streaming {
			if enc == nil {
				enc, flusher = startNDJSON(w)
			}
			if err := enc.Encode(client.ToolEvent{Type: "progress", Data: p.GetData()}); err != nil {
				return // the client went away; the agent's call ends with the stream
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
	}
	if result == nil {
		err := stream.Err()
		if err == nil {
			err = fmt.Errorf("the sandbox's agent ended the call without a result: %w", errdefs.ErrUnavailable)
		}
		if why := s.deps.Sessions.StoppedDuringCommand(r.Context(), teamOf(r), id, start); why != nil {
			err = why
		}
		err = fmt.Errorf("tool %s: %w", name, err)
		if enc != nil {
			_ = enc.Encode(client.ToolEvent{Type: "error", Error: messageOf(err)})
			return
		}
		writeError(w, r, err)
		return
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
		done() // a turn waits for running commands; this one is over
		snap, err := s.deps.Sessions.Turn(r.Context(), teamOf(r), id)
		if err != nil {
			out.SnapshotError = "turn snapshot failed: " + messageOf(err)
		} else {
			out.SnapshotID, call.SnapshotID, call.Turn = snap.ID, snap.ID, snap.Turn
		}
	}
	exit = procs.Exit{}
	if out.ExitCode != nil {
		exit.ExitCode = *out.ExitCode
	}
	s.deps.Sessions.RecordToolCall(r.Context(), call)
	s.deps.Logs.Event(id, toolLogLevel(out), toolLogLine(name, out))
	if enc != nil || streaming {
		if enc == nil {
			enc, _ = startNDJSON(w)
		}
		_ = enc.Encode(client.ToolEvent{Type: "result", Result: &out})
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// toolCalls serves GET /sandboxes/{id}/tools/calls?after=&limit=.
func (s *Server) toolCalls(w http.ResponseWriter, r *http.Request) {
	after, err := afterParam(r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	limit, err := pageLimit(r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	calls, err := s.deps.Sessions.ToolCalls(r.Context(), teamOf(r), r.PathValue("id"), after, limit)
	if err != nil {
		writeError(w, r, err)
		return
	}
	out := make([]client.ToolCallRecord, 0, len(calls))
	for _, c := range calls {
		out = append(out, client.ToolCallRecord{
			ID: c.ID, ToolCallID: c.ToolCallID, Tool: c.Tool, At: c.At,
			ParamsDigest: c.ParamsDigest, ParamsBytes: c.ParamsBytes, ResultBytes: c.ResultBytes,
			DurationMs: uint64(c.Duration.Milliseconds()), IsError: c.IsError, ExitCode: c.ExitCode,
			Turn: c.Turn, SnapshotID: c.SnapshotID,
		})
	}
	writeJSON(w, http.StatusOK, out)
}

func startNDJSON(w http.ResponseWriter) (*json.Encoder, http.Flusher) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	return json.NewEncoder(w), f
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

// decodeJSONLimit decodes a JSON body of at most limit bytes.
func decodeJSONLimit(w http.ResponseWriter, r *http.Request, v any, limit int64) error {
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	dec := json.NewDecoder(r.Body)
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return nil
		}
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return fmt.Errorf("request body is larger than %d bytes: %w", tooBig.Limit, errTooLarge)
		}
		return fmt.Errorf("request body is not valid JSON: %v: %w", err, errdefs.ErrInvalid)
	}
	return nil
}

// listTools serves GET /tools: every tool with its params' JSON Schema.
func (s *Server) listTools(w http.ResponseWriter, r *http.Request) {
	if len(s.deps.Tools) == 0 {
		writeError(w, r, fmt.Errorf("the tool catalogue could not be read from the agent binary (see the daemon's log): %w", errdefs.ErrUnavailable))
		return
	}
	writeJSON(w, http.StatusOK, s.deps.Tools)
}
