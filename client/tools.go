package client

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// ToolsService lists warren's tools and calls them in sandboxes (the /tools
// and /sandboxes/{id}/tools routes).
type ToolsService struct{ t *transport }

// Tool describes one of the typed tools an agent calls in a sandbox (GET
// /tools): bash, read, write, edit, ls, glob, grep, apply_patch.
type Tool struct {
	Name string `json:"name"`
	// Description is written for a model to read.
	Description string `json:"description"`
	// Params is the JSON Schema of the tool's params object.
	Params json.RawMessage `json:"params"`
}

// ToolCall asks for one tool call (POST /sandboxes/{id}/tools/{name}).
type ToolCall struct {
	// ToolCallID is the caller's id of the call (e.g. the model's tool-use
	// id), kept in the call's record.
	ToolCallID string `json:"toolCallID,omitempty"`
	// Params are the tool's params (a JSON object; see Tool.Params).
	Params json.RawMessage `json:"params,omitempty"`
	// Turn takes a turn snapshot after the call.
	Turn bool `json:"turn,omitempty"`
	// User runs the tool as this user (default "user" where it exists);
	// Cwd is where relative paths resolve (default the user's home).
	User string `json:"user,omitempty"`
	Cwd  string `json:"cwd,omitempty"`
}

// ToolResult is what a tool call gave. A failure that is the model's doing
// (a missing file, an ambiguous edit, a command exiting non-zero) is a
// result with IsError; an error return means the call itself was refused.
type ToolResult struct {
	ToolCallID string `json:"toolCallID,omitempty"`
	// Content is what the model reads: UTF-8, bounded.
	Content string `json:"content"`
	IsError bool   `json:"isError"`
	// ExitCode is bash's exit status (128+signal when killed).
	ExitCode   *int32 `json:"exitCode,omitempty"`
	DurationMs uint64 `json:"durationMs"`
	// SnapshotID is the turn snapshot taken after the call; SnapshotError
	// says why one that was asked for failed.
	SnapshotID    string `json:"snapshotID,omitempty"`
	SnapshotError string `json:"snapshotError,omitempty"`
}

// ToolEvent is one line of a streamed tool call: "progress" (Data: a chunk
// of bash's output), then one "result", or "error" when the call broke.
type ToolEvent struct {
	Type   string      `json:"type"`
	Data   []byte      `json:"data,omitempty"`
	Result *ToolResult `json:"result,omitempty"`
	Error  string      `json:"error,omitempty"`
}

// ToolCallRecord is a past tool call of a sandbox (GET
// /sandboxes/{id}/tools/calls).
type ToolCallRecord struct {
	ID         int64     `json:"id"`
	ToolCallID string    `json:"toolCallID,omitempty"`
	Tool       string    `json:"tool"`
	At         time.Time `json:"at"`
	// ParamsDigest is the SHA-256 of the params as sent, hex.
	ParamsDigest string `json:"paramsDigest"`
	ParamsBytes  int    `json:"paramsBytes"`
	ResultBytes  int    `json:"resultBytes"`
	DurationMs   uint64 `json:"durationMs"`
	IsError      bool   `json:"isError"`
	ExitCode     *int32 `json:"exitCode,omitempty"`
	// Turn is the turn snapshot taken after the call, if any.
	Turn       int    `json:"turn,omitempty"`
	SnapshotID string `json:"snapshotID,omitempty"`
}

// List describes the tools.
func (s *ToolsService) List(ctx context.Context) ([]Tool, error) {
	var out []Tool
	err := s.t.call(ctx, request{method: http.MethodGet, path: "/tools"}, &out)
	return out, err
}

// Call runs one tool in a sandbox. With progress set, the call streams
// and progress sees bash's output as it comes.
func (s *ToolsService) Call(ctx context.Context, id, tool string, in ToolCall, progress func([]byte)) (ToolResult, error) {
	r, err := jsonBody(http.MethodPost, sandboxPath(id, "/tools/"+url.PathEscape(tool)), in)
	if err != nil {
		return ToolResult{}, err
	}
	if progress == nil {
		var out ToolResult
		err := s.t.call(ctx, r, &out)
		return out, err
	}
	r.query = url.Values{"stream": {"true"}}
	resp, err := s.t.send(ctx, r)
	if err != nil {
		return ToolResult{}, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), maxEventLine)
	for sc.Scan() {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var ev ToolEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return ToolResult{}, fmt.Errorf("tool %s: bad event from the server: %w", tool, err)
		}
		switch ev.Type {
		case "progress":
			progress(ev.Data)
		case "result":
			if ev.Result == nil {
				return ToolResult{}, fmt.Errorf("tool %s: a result event without a result", tool)
			}
			return *ev.Result, nil
		case "error":
			return ToolResult{}, fmt.Errorf("tool %s: %s", tool, ev.Error)
		}
	}
	if err := sc.Err(); err != nil {
		if ctx.Err() != nil {
			return ToolResult{}, ctx.Err()
		}
		return ToolResult{}, fmt.Errorf("tool %s: stream broke: %w", tool, err)
	}
	return ToolResult{}, fmt.Errorf("tool %s: the stream ended without a result", tool)
}

// Calls lists a sandbox's tool calls after record id after (0: from the
// first), oldest first, at most limit (0: the server's default).
func (s *ToolsService) Calls(ctx context.Context, id string, after int64, limit int) ([]ToolCallRecord, error) {
	q := url.Values{}
	if after > 0 {
		q.Set("after", strconv.FormatInt(after, 10))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out []ToolCallRecord
	err := s.t.call(ctx, request{method: http.MethodGet, path: sandboxPath(id, "/tools/calls"), query: q}, &out)
	return out, err
}
