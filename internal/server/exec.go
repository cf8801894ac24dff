package server

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/warrenhq/warren/client"
)

// Commands is what the exec and tool routes need: the command service
// (*commands.Service), which admits, runs and logs each call and takes the
// turn that may follow.
type Commands interface {
	Exec(ctx context.Context, team, id string, req client.ExecRequest, emit func(client.ExecEvent) error) error
	ExecWait(ctx context.Context, team, id string, req client.ExecRequest) (client.ExecResult, error)
	CallTool(ctx context.Context, team, id, name string, req client.ToolCall, progress func([]byte) error) (client.ToolResult, error)
}

// commandRoutes serve exec.
type commandRoutes struct {
	commands Commands
}

// exec runs a command in a sandbox and streams its events as NDJSON, or with
// ?wait=true answers once with the whole output.
func (s *commandRoutes) exec(w http.ResponseWriter, r *http.Request) {
	var req client.ExecRequest
	if err := decodeJSON(w, r, &req); err != nil {
		writeError(w, r, err)
		return
	}
	if r.URL.Query().Get("wait") == "true" {
		res, err := s.commands.ExecWait(r.Context(), teamOf(r), r.PathValue("id"), req)
		if err != nil {
			writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, res)
		return
	}
	var out ndjson
	err := s.commands.Exec(r.Context(), teamOf(r), r.PathValue("id"), req, func(ev client.ExecEvent) error {
		return out.send(w, ev)
	})
	if err != nil && !out.started() {
		writeError(w, r, err)
	}
}

// ndjson streams events as NDJSON, starting the answer with the first.
type ndjson struct {
	enc     *json.Encoder
	flusher http.Flusher
}

func (n *ndjson) started() bool { return n.enc != nil }

func (n *ndjson) send(w http.ResponseWriter, v any) error {
	if n.enc == nil {
		n.enc, n.flusher = startNDJSON(w)
	}
	if err := n.enc.Encode(v); err != nil {
		return err
	}
	if n.flusher != nil {
		n.flusher.Flush()
	}
	return nil
}

func startNDJSON(w http.ResponseWriter) (*json.Encoder, http.Flusher) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	return json.NewEncoder(w), f
}
