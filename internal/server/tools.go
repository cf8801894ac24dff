package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/errdefs"
)

// maxToolBody bounds a tool call's body: a write or an apply_patch carries
// a whole file.
const maxToolBody = 32 << 20

// toolRoutes serve the tool catalogue, tool calls and their record.
type toolRoutes struct {
	commands Commands
	records  Records
	tools    []client.Tool
}

// callTool serves POST /sandboxes/{id}/tools/{name}: one tool call run by
// the sandbox's agent, recorded, and followed by a turn snapshot when the
// call or the sandbox asks for one. With ?stream=true the answer is NDJSON:
// "progress" events (bash's output as it comes), then one "result".
func (s *toolRoutes) callTool(w http.ResponseWriter, r *http.Request) {
	var req client.ToolCall
	if err := decodeJSONLimit(w, r, &req, maxToolBody); err != nil {
		writeError(w, r, err)
		return
	}
	var progress func([]byte) error
	var out ndjson
	streaming := r.URL.Query().Get("stream") == "true"
	if streaming {
		progress = func(data []byte) error {
			return out.send(w, client.ToolEvent{Type: "progress", Data: data})
		}
	}
	res, err := s.commands.CallTool(r.Context(), teamOf(r), r.PathValue("id"), r.PathValue("name"), req, progress)
	switch {
	case err != nil && out.started():
		_ = out.send(w, client.ToolEvent{Type: "error", Error: messageOf(err)})
	case err != nil:
		writeError(w, r, err)
	case streaming:
		_ = out.send(w, client.ToolEvent{Type: "result", Result: &res})
	default:
		writeJSON(w, http.StatusOK, res)
	}
}

// toolCalls serves GET /sandboxes/{id}/tools/calls?after=&limit=.
func (s *toolRoutes) toolCalls(w http.ResponseWriter, r *http.Request) {
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
	calls, err := s.records.ToolCalls(r.Context(), teamOf(r), r.PathValue("id"), after, limit)
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
func (s *toolRoutes) listTools(w http.ResponseWriter, r *http.Request) {
	if len(s.tools) == 0 {
		writeError(w, r, fmt.Errorf("the tool catalogue could not be read from the agent binary (see the daemon's log): %w", errdefs.ErrUnavailable))
		return
	}
	writeJSON(w, http.StatusOK, s.tools)
}
