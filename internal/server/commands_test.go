package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/commands"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/store"
)

// fakeKeys knows one key, of team "t".
type fakeKeys struct{}

func (fakeKeys) AuthenticateKey(_ context.Context, key string) (store.APIKey, error) {
	if key != "k" {
		return store.APIKey{}, errdefs.ErrNotFound
	}
	return store.APIKey{ID: "key1", Team: "t"}, nil
}
func (fakeKeys) CreateAPIKey(context.Context, string, string) (string, store.APIKey, error) {
	return "", store.APIKey{}, errdefs.ErrUnsupported
}
func (fakeKeys) ListAPIKeys(context.Context, string) ([]store.APIKey, error) { return nil, nil }
func (fakeKeys) RevokeAPIKey(context.Context, string) error                  { return nil }

// fakeCommands answers as the test says, and records what it was asked.
type fakeCommands struct {
	events []client.ExecEvent // Exec's events, in order
	result client.ExecResult  // ExecWait's answer
	tool   client.ToolResult  // CallTool's answer
	output [][]byte           // CallTool's progress
	err    error              // every call's error (after the events)
	asked  string             // "team/id" or "team/id/tool" of the last call
}

func (f *fakeCommands) Exec(_ context.Context, team, id string, _ client.ExecRequest, emit func(client.ExecEvent) error) error {
	f.asked = team + "/" + id
	for _, ev := range f.events {
		if err := emit(ev); err != nil {
			return err
		}
	}
	return f.err
}

func (f *fakeCommands) ExecWait(_ context.Context, team, id string, _ client.ExecRequest) (client.ExecResult, error) {
	f.asked = team + "/" + id
	return f.result, f.err
}

func (f *fakeCommands) CallTool(_ context.Context, team, id, name string, _ client.ToolCall, progress func([]byte) error) (client.ToolResult, error) {
	f.asked = team + "/" + id + "/" + name
	for _, p := range f.output {
		if progress != nil {
			if err := progress(p); err != nil {
				return client.ToolResult{}, err
			}
		}
	}
	return f.tool, f.err
}

// The file calls of fakeCommands: each answers f.err, or an entry named
// after what it was asked.
func (f *fakeCommands) Stat(_ context.Context, team, id, path string) (client.EntryInfo, error) {
	f.asked = team + "/" + id + ":stat " + path
	return client.EntryInfo{Path: path}, f.err
}
func (f *fakeCommands) ListDir(_ context.Context, team, id, path string, depth uint32) ([]client.EntryInfo, error) {
	f.asked = fmt.Sprintf("%s/%s:ls %s %d", team, id, path, depth)
	return []client.EntryInfo{{Path: path}}, f.err
}
func (f *fakeCommands) MakeDir(_ context.Context, team, id, path, user string) (client.EntryInfo, error) {
	f.asked = team + "/" + id + ":mkdir " + path + " " + user
	return client.EntryInfo{Path: path}, f.err
}
func (f *fakeCommands) Remove(_ context.Context, team, id, path string) error {
	f.asked = team + "/" + id + ":rm " + path
	return f.err
}
func (f *fakeCommands) Move(_ context.Context, team, id, src, dst string) (client.EntryInfo, error) {
	f.asked = team + "/" + id + ":mv " + src + " " + dst
	return client.EntryInfo{Path: dst}, f.err
}
func (f *fakeCommands) ReadFile(context.Context, string, string, string) (*commands.FileReader, error) {
	return nil, errdefs.ErrUnsupported
}
func (f *fakeCommands) WriteFile(_ context.Context, team, id string, req commands.WriteFileRequest, body io.Reader) (client.EntryInfo, error) {
	b, err := io.ReadAll(body)
	if err != nil {
		return client.EntryInfo{}, err
	}
	f.asked = fmt.Sprintf("%s/%s:write %s %o %d bytes", team, id, req.Path, req.Mode, len(b))
	return client.EntryInfo{Path: req.Path, Size: int64(len(b))}, f.err
}

// The background-process calls of fakeCommands.
func (f *fakeCommands) StartProcess(_ context.Context, team, id string, req client.StartProcessRequest) (client.ProcessInfo, error) {
	f.asked = team + "/" + id + ":start " + req.Command
	return client.ProcessInfo{PID: 9, Tag: req.Tag, State: "running"}, f.err
}
func (f *fakeCommands) SendInput(_ context.Context, team, id, ref string, data []byte) error {
	f.asked = fmt.Sprintf("%s/%s:stdin %s %d bytes", team, id, ref, len(data))
	return f.err
}
func (f *fakeCommands) CloseInput(_ context.Context, team, id, ref string) error {
	f.asked = team + "/" + id + ":close " + ref
	return f.err
}
func (f *fakeCommands) Signal(_ context.Context, team, id, ref, sig string) error {
	f.asked = team + "/" + id + ":kill " + ref + " " + sig
	return f.err
}

func commandServer(f *fakeCommands) *Server {
	return New(Deps{Keys: fakeKeys{}, Commands: f, Files: f, Processes: f, MaxUploadBytes: 1 << 10, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
}

// ndjsonLines splits an NDJSON answer into its objects.
func ndjsonLines(t *testing.T, body string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("NDJSON line %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

// The exec and tool routes only decode, call the command service and
// encode: the status of an error before anything was sent, NDJSON once
// events flow, an error after that in-band.
func TestCommandRoutes(t *testing.T) {
	exit0 := int32(0)
	code3 := int32(3)
	for _, tc := range []struct {
		name     string
		method   string
		path     string
		body     string
		key      string
		fake     fakeCommands
		status   int
		ndjson   []string // the "type" of each NDJSON line, when streaming
		contains string
		asked    string
	}{
		{name: "no key", method: "POST", path: "/sandboxes/sb/exec", body: `{"command":"true"}`,
			status: 401, contains: "missing API key"},
		{name: "bad JSON", method: "POST", path: "/sandboxes/sb/exec", body: `{"command":`, key: "k",
			status: 400, contains: "not valid JSON"},
		{name: "exec streams", method: "POST", path: "/sandboxes/sb/exec", body: `{"command":"echo hi"}`, key: "k",
			fake:   fakeCommands{events: []client.ExecEvent{{Type: "start", PID: 7}, {Type: "stdout", Data: []byte("hi\n")}, {Type: "exit", ExitCode: &exit0}}},
			status: 200, ndjson: []string{"start", "stdout", "exit"}, asked: "t/sb"},
		{name: "exec refused before it starts", method: "POST", path: "/sandboxes/sb/exec", body: `{"command":"true"}`, key: "k",
			fake:   fakeCommands{err: fmt.Errorf("sandbox sb is paused; resume it first: %w", errdefs.ErrConflict)},
			status: 409, contains: "resume it first", asked: "t/sb"},
		{name: "exec of an unknown sandbox", method: "POST", path: "/sandboxes/nope/exec", body: `{"command":"true"}`, key: "k",
			fake:   fakeCommands{err: fmt.Errorf("sandbox nope: %w", errdefs.ErrNotFound)},
			status: 404, asked: "t/nope"},
		{name: "exec invalid", method: "POST", path: "/sandboxes/sb/exec", body: `{}`, key: "k",
			fake:   fakeCommands{err: fmt.Errorf("give either cmd or command: %w", errdefs.ErrInvalid)},
			status: 400, contains: "give either", asked: "t/sb"},
		{name: "exec waits", method: "POST", path: "/sandboxes/sb/exec?wait=true", body: `{"command":"exit 3"}`, key: "k",
			fake:   fakeCommands{result: client.ExecResult{ExitCode: 3, Stdout: "out"}},
			status: 200, contains: `"exitCode":3`, asked: "t/sb"},
		{name: "exec waits, agent gone", method: "POST", path: "/sandboxes/sb/exec?wait=true", body: `{"command":"true"}`, key: "k",
			fake:   fakeCommands{err: fmt.Errorf("sandbox agent: %w", errdefs.ErrUnavailable)},
			status: 502, asked: "t/sb"},
		{name: "tool answers once", method: "POST", path: "/sandboxes/sb/tools/bash", body: `{"params":{"command":"ls"}}`, key: "k",
			fake:   fakeCommands{tool: client.ToolResult{Content: "a\n", ExitCode: &code3}, output: [][]byte{[]byte("a\n")}},
			status: 200, contains: `"content":"a\n"`, asked: "t/sb/bash"},
		{name: "tool streams progress then its result", method: "POST", path: "/sandboxes/sb/tools/bash?stream=true", body: `{}`, key: "k",
			fake:   fakeCommands{tool: client.ToolResult{Content: "done"}, output: [][]byte{[]byte("a"), []byte("b")}},
			status: 200, ndjson: []string{"progress", "progress", "result"}, asked: "t/sb/bash"},
		{name: "tool stream breaks after progress", method: "POST", path: "/sandboxes/sb/tools/bash?stream=true", body: `{}`, key: "k",
			fake:   fakeCommands{output: [][]byte{[]byte("a")}, err: errors.New("tool bash: the sandbox was rolled back")},
			status: 200, ndjson: []string{"progress", "error"}, asked: "t/sb/bash"},
		{name: "tool refused before any progress", method: "POST", path: "/sandboxes/sb/tools/bash?stream=true", body: `{}`, key: "k",
			fake:   fakeCommands{err: fmt.Errorf("params must be a JSON object: %w", errdefs.ErrInvalid)},
			status: 400, contains: "JSON object", asked: "t/sb/bash"},
		{name: "stat", method: "GET", path: "/sandboxes/sb/files/stat?path=/etc/passwd", key: "k",
			status: 200, contains: `"path":"/etc/passwd"`, asked: "t/sb:stat /etc/passwd"},
		{name: "stat without a path", method: "GET", path: "/sandboxes/sb/files/stat", key: "k",
			status: 400, contains: "query parameter"},
		{name: "stat of a missing file", method: "GET", path: "/sandboxes/sb/files/stat?path=/nope", key: "k",
			fake:   fakeCommands{err: fmt.Errorf("stat /nope: %w", errdefs.ErrNotFound)},
			status: 404, asked: "t/sb:stat /nope"},
		{name: "list to a depth", method: "GET", path: "/sandboxes/sb/files/list?path=/w&depth=3", key: "k",
			status: 200, asked: "t/sb:ls /w 3"},
		{name: "list too deep", method: "GET", path: "/sandboxes/sb/files/list?path=/w&depth=99", key: "k",
			status: 400, contains: "depth"},
		{name: "mkdir as a user", method: "POST", path: "/sandboxes/sb/files/mkdir?path=/w/d&user=user", key: "k",
			status: 200, asked: "t/sb:mkdir /w/d user"},
		{name: "remove", method: "DELETE", path: "/sandboxes/sb/files?path=/w/d", key: "k",
			status: 204, asked: "t/sb:rm /w/d"},
		{name: "move", method: "POST", path: "/sandboxes/sb/files/move", body: `{"source":"/a","destination":"/b"}`, key: "k",
			status: 200, contains: `"path":"/b"`, asked: "t/sb:mv /a /b"},
		{name: "move without a destination", method: "POST", path: "/sandboxes/sb/files/move", body: `{"source":"/a"}`, key: "k",
			status: 400, contains: "destination"},
		{name: "write with a mode", method: "PUT", path: "/sandboxes/sb/files?path=/w/f&mode=0600", body: "hello", key: "k",
			status: 200, asked: "t/sb:write /w/f 600 5 bytes"},
		{name: "write with a bad mode", method: "PUT", path: "/sandboxes/sb/files?path=/w/f&mode=9", body: "hello", key: "k",
			status: 400, contains: "octal"},
		{name: "write over the upload limit", method: "PUT", path: "/sandboxes/sb/files?path=/w/f", body: strings.Repeat("x", 2<<10), key: "k",
			status: 413, contains: "--max-upload-mb"},
		{name: "start a process", method: "POST", path: "/sandboxes/sb/processes", body: `{"command":"sleep 9","tag":"s"}`, key: "k",
			status: 201, contains: `"pid":9`, asked: "t/sb:start sleep 9"},
		{name: "start refused", method: "POST", path: "/sandboxes/sb/processes", body: `{"command":"x","turn":true}`, key: "k",
			fake:   fakeCommands{err: fmt.Errorf("turn does not apply: %w", errdefs.ErrInvalid)},
			status: 400, asked: "t/sb:start x"},
		{name: "stdin", method: "POST", path: "/sandboxes/sb/processes/s/stdin", body: "abc", key: "k",
			status: 204, asked: "t/sb:stdin s 3 bytes"},
		{name: "stdin too large", method: "POST", path: "/sandboxes/sb/processes/s/stdin", body: strings.Repeat("x", commands.MaxStdin+1), key: "k",
			status: 413},
		{name: "close stdin", method: "POST", path: "/sandboxes/sb/processes/s/stdin/close", key: "k",
			status: 204, asked: "t/sb:close s"},
		{name: "signal", method: "POST", path: "/sandboxes/sb/processes/9/signal", body: `{"signal":"term"}`, key: "k",
			status: 204, asked: "t/sb:kill 9 term"},
		{name: "signal of a gone process", method: "POST", path: "/sandboxes/sb/processes/9/signal", body: `{"signal":"term"}`, key: "k",
			fake:   fakeCommands{err: fmt.Errorf("process 9: %w", errdefs.ErrNotFound)},
			status: 404, asked: "t/sb:kill 9 term"},
		{name: "tool body too large", method: "POST", path: "/sandboxes/sb/tools/write", body: `{"params":{"content":"` + strings.Repeat("x", maxToolBody) + `"}}`, key: "k",
			status: 413},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.fake
			req := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
			if tc.key != "" {
				req.Header.Set("X-API-Key", tc.key)
			}
			rec := httptest.NewRecorder()
			commandServer(&f).ServeHTTP(rec, req)
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.status, rec.Body)
			}
			if tc.contains != "" && !strings.Contains(rec.Body.String(), tc.contains) {
				t.Fatalf("body %s lacks %q", rec.Body, tc.contains)
			}
			if f.asked != tc.asked {
				t.Fatalf("the service was asked for %q, want %q", f.asked, tc.asked)
			}
			if tc.ndjson == nil {
				return
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/x-ndjson" {
				t.Fatalf("content type %q", ct)
			}
			var types []string
			for _, l := range ndjsonLines(t, rec.Body.String()) {
				types = append(types, fmt.Sprint(l["type"]))
			}
			if strings.Join(types, ",") != strings.Join(tc.ndjson, ",") {
				t.Fatalf("NDJSON events %v, want %v", types, tc.ndjson)
			}
		})
	}
}
