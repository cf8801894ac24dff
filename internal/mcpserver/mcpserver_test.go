package mcpserver

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/warrenhq/warren/client"
)

// fakeAPI is a stand-in for the daemon's REST API: it records what the MCP
// server sends and answers like the daemon does.
type fakeAPI struct {
	t *testing.T
	// toolsDown makes GET /tools fail (the daemon not up yet).
	toolsDown atomic.Bool

	mu    sync.Mutex
	calls []apiCall
}

type apiCall struct {
	Method, Path, Query, Key string
	Body                     map[string]any
}

func newFakeAPI(t *testing.T) (*fakeAPI, *httptest.Server) {
	f := &fakeAPI{t: t}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv
}

func (f *fakeAPI) recorded() []apiCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// last is the last call to path.
func (f *fakeAPI) last(t *testing.T, method, path string) apiCall {
	t.Helper()
	calls := f.recorded()
	for i := len(calls) - 1; i >= 0; i-- {
		if calls[i].Method == method && calls[i].Path == path {
			return calls[i]
		}
	}
	t.Fatalf("no %s %s among %+v", method, path, calls)
	return apiCall{}
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c := apiCall{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Key: r.Header.Get("X-API-Key")}
	if b, _ := io.ReadAll(r.Body); len(b) > 0 {
		if err := json.Unmarshal(b, &c.Body); err != nil {
			f.t.Errorf("%s %s: body is not a JSON object: %s", r.Method, r.URL.Path, b)
		}
	}
	f.mu.Lock()
	f.calls = append(f.calls, c)
	f.mu.Unlock()

	reply := func(code int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(v)
	}
	notFound := func(msg string) { reply(404, client.Error{Code: 404, Message: msg}) }
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case r.Method == "GET" && r.URL.Path == "/tools":
		if f.toolsDown.Load() {
			reply(503, client.Error{Code: 503, Message: "not ready"})
			return
		}
		reply(200, []client.Tool{
			{Name: "bash", Description: "Runs a shell command.", Params: json.RawMessage(
				`{"type":"object","properties":{"command":{"type":"string","minLength":1},"timeoutMs":{"type":"integer"}},"required":["command"],"additionalProperties":false}`)},
			{Name: "read", Description: "Reads a file.", Params: json.RawMessage(
				`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false}`)},
		})
	case r.Method == "POST" && len(parts) == 4 && parts[0] == "sandboxes" && parts[2] == "tools":
		id, tool := parts[1], parts[3]
		if id != "sb1" {
			notFound("sandbox " + id + " not found")
			return
		}
		params, _ := c.Body["params"].(map[string]any)
		res := client.ToolResult{Content: tool + " ran", DurationMs: 1}
		if cmd, _ := params["command"].(string); cmd == "false" {
			code := int32(1)
			res = client.ToolResult{Content: "[exit code 1]", IsError: true, ExitCode: &code}
		}
		if turn, _ := c.Body["turn"].(bool); turn {
			res.SnapshotID = "snap-turn"
		}
		if r.URL.Query().Get("stream") == "true" {
			w.Header().Set("Content-Type", "application/x-ndjson")
			enc := json.NewEncoder(w)
			_ = enc.Encode(client.ToolEvent{Type: "progress", Data: []byte("hel")})
			_ = enc.Encode(client.ToolEvent{Type: "progress", Data: []byte("lo\n")})
			_ = enc.Encode(client.ToolEvent{Type: "result", Result: &res})
			return
		}
		reply(200, res)
	case r.Method == "POST" && r.URL.Path == "/sandboxes":
		tmpl, _ := c.Body["templateID"].(string)
		if tmpl == "" {
			tmpl = "base"
		}
		if tmpl == "nope" {
			reply(400, client.Error{Code: 400, Message: "template nope does not exist"})
			return
		}
		reply(201, client.Sandbox{SandboxID: "sb1", TemplateID: tmpl})
	case r.Method == "GET" && r.URL.Path == "/v2/sandboxes":
		reply(200, []client.ListedSandbox{{Sandbox: client.Sandbox{SandboxID: "sb1", TemplateID: "base"}, State: "running",
			StartedAt: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC), Metadata: map[string]string{"task": "t1"}}})
	case r.Method == "DELETE" && len(parts) == 2 && parts[0] == "sandboxes":
		if parts[1] != "sb1" {
			notFound("sandbox " + parts[1] + " not found")
			return
		}
		w.WriteHeader(204)
	case r.Method == "POST" && r.URL.Path == "/sandboxes/sb1/snapshots":
		name, _ := c.Body["name"].(string)
		reply(201, client.Snapshot{SnapshotID: "snap1", Name: name, SandboxID: "sb1"})
	case r.Method == "POST" && r.URL.Path == "/sandboxes/sb1/rollback":
		reply(200, client.RollbackResult{SnapshotID: "snap1", ProcessesRestarted: true})
	case r.Method == "POST" && r.URL.Path == "/sandboxes/sb1/fork":
		reply(200, []client.ForkResult{{Sandbox: &client.Sandbox{SandboxID: "sb2"}}, {Error: &client.Error{Code: 507, Message: "no space left"}}})
	case r.Method == "GET" && r.URL.Path == "/snapshots/snap1/diff":
		reply(200, client.Diff{From: "snap1", To: "live:sb1", Added: 1, Modified: 1, Changes: []client.DiffEntry{
			{Path: "/home/user/new.txt", Change: "added", Type: "file", Size: 3},
			{Path: "/home/user/a.txt", Change: "modified", Type: "file", OldSize: 2, Size: 4, Diff: "--- a\n+++ b\n@@ -1 +1 @@\n-a\n+abc\n"},
		}})
	default:
		notFound("no route " + r.Method + " " + r.URL.Path)
	}
}

// connect runs New over an in-memory transport and returns a connected
// client session.
func connect(t *testing.T, c *client.Client, copts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := New(c, "test").Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, copts).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func listTools(t *testing.T, cs *mcp.ClientSession) map[string]*mcp.Tool {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*mcp.Tool{}
	for _, tl := range res.Tools {
		out[tl.Name] = tl
	}
	return out
}

// call calls a tool and returns its text and whether it was an error; a
// protocol error fails the test.
func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error: %v", name, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		tc, ok := c.(*mcp.TextContent)
		if !ok {
			t.Fatalf("%s: content %T, want text", name, c)
		}
		b.WriteString(tc.Text)
	}
	return b.String(), res.IsError
}

func schemaOf(t *testing.T, tl *mcp.Tool) map[string]any {
	t.Helper()
	b, err := json.Marshal(tl.InputSchema)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestToolListTakesSchemasFromDaemon(t *testing.T) {
	_, srv := newFakeAPI(t)
	cs := connect(t, client.New(srv.URL, "k"), nil)
	tools := listTools(t, cs)

	var names []string
	for n := range tools {
		names = append(names, n)
	}
	slices.Sort(names)
	want := []string{"bash", "diff", "fork", "read", "rollback", "sandbox_create", "sandbox_kill", "sandbox_list", "snapshot"}
	if !slices.Equal(names, want) {
		// The daemon lists only bash and read: the other fallbacks go.
		t.Fatalf("tools = %v, want %v", names, want)
	}
	bash := schemaOf(t, tools["bash"])
	props := bash["properties"].(map[string]any)
	for _, p := range []string{"command", "timeoutMs", "sandboxId", "turn"} {
		if props[p] == nil {
			t.Errorf("bash schema lacks %s: %v", p, bash)
		}
	}
	req := bash["required"].([]any)
	if !slices.Contains(req, any("sandboxId")) || !slices.Contains(req, any("command")) {
		t.Errorf("bash required = %v", req)
	}
	if bash["additionalProperties"] != false {
		t.Errorf("bash schema lost additionalProperties: %v", bash)
	}
	if !strings.HasPrefix(tools["bash"].Description, "Runs a shell command.") {
		t.Errorf("bash description = %q", tools["bash"].Description)
	}
	if tools["read"].Annotations == nil || !tools["read"].Annotations.ReadOnlyHint {
		t.Errorf("read is not marked read-only")
	}
}

func TestSandboxToolCallMapping(t *testing.T) {
	f, srv := newFakeAPI(t)
	cs := connect(t, client.New(srv.URL, "key1"), nil)

	out, isErr := call(t, cs, "bash", map[string]any{"sandboxId": "sb1", "command": "echo hi", "timeoutMs": 500, "turn": true})
	if isErr || out != "bash ran\n[snapshot snap-turn taken after this call]" {
		t.Fatalf("bash = %q (error %v)", out, isErr)
	}
	got := f.last(t, "POST", "/sandboxes/sb1/tools/bash")
	if got.Key != "key1" || got.Body["turn"] != true {
		t.Errorf("call = %+v", got)
	}
	params := got.Body["params"].(map[string]any)
	if len(params) != 2 || params["command"] != "echo hi" || params["timeoutMs"] != float64(500) {
		t.Errorf("params sent = %v, want command and timeoutMs only", params)
	}

	// A result the model caused is a tool error, not a protocol error.
	out, isErr = call(t, cs, "bash", map[string]any{"sandboxId": "sb1", "command": "false"})
	if !isErr || out != "[exit code 1]" {
		t.Errorf("failing bash = %q (error %v)", out, isErr)
	}
	// So is a refused call: the daemon's message is what the model reads.
	out, isErr = call(t, cs, "read", map[string]any{"sandboxId": "gone", "path": "/x"})
	if !isErr || out != "sandbox gone not found" {
		t.Errorf("read in a missing sandbox = %q (error %v)", out, isErr)
	}
	out, isErr = call(t, cs, "read", map[string]any{"path": "/x"})
	if !isErr || !strings.Contains(out, "sandboxId is required") {
		t.Errorf("read without sandboxId = %q (error %v)", out, isErr)
	}
}

func TestBashProgress(t *testing.T) {
	_, srv := newFakeAPI(t)
	var (
		mu   sync.Mutex
		msgs []string
	)
	cs := connect(t, client.New(srv.URL, "k"), &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			msgs = append(msgs, r.Params.Message)
			mu.Unlock()
		},
	})
	p := &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"sandboxId": "sb1", "command": "echo hello"}}
	p.SetProgressToken("tok")
	res, err := cs.CallTool(context.Background(), p)
	if err != nil || res.IsError {
		t.Fatalf("bash: %v %+v", err, res)
	}
	// Notifications may trail the result; wait for them without timing
	// assertions on how long they take.
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		got := strings.Join(msgs, "")
		mu.Unlock()
		if got == "hello\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("progress = %q, want the streamed output", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestOwnToolsMapping(t *testing.T) {
	f, srv := newFakeAPI(t)
	cs := connect(t, client.New(srv.URL, "k"), nil)

	out, isErr := call(t, cs, "sandbox_create", map[string]any{"template": "bb", "timeoutSeconds": 0,
		"metadata": map[string]string{"task": "t1"}, "envs": map[string]string{"A": "1"}, "snapshotEveryToolCall": true})
	if isErr || !strings.Contains(out, "sandboxId: sb1") {
		t.Fatalf("sandbox_create = %q", out)
	}
	body := f.last(t, "POST", "/sandboxes").Body
	if body["templateID"] != "bb" || body["timeout"] != float64(0) || body["snapshotEveryToolCall"] != true ||
		body["envVars"].(map[string]any)["A"] != "1" || body["metadata"].(map[string]any)["task"] != "t1" {
		t.Errorf("create body = %v", body)
	}
	// Without a timeout the daemon's default applies: none is sent.
	call(t, cs, "sandbox_create", map[string]any{})
	if body := f.last(t, "POST", "/sandboxes").Body; body["timeout"] != nil || body["templateID"] != nil {
		t.Errorf("default create body = %v", body)
	}
	if out, isErr := call(t, cs, "sandbox_create", map[string]any{"template": "nope"}); !isErr || out != "template nope does not exist" {
		t.Errorf("bad template = %q (error %v)", out, isErr)
	}

	out, _ = call(t, cs, "sandbox_list", map[string]any{"metadata": map[string]string{"task": "t1"}})
	if out != "sb1  template=base  state=running  started=2025-01-02T03:04:05Z  metadata=task=t1" {
		t.Errorf("sandbox_list = %q", out)
	}
	if q := f.last(t, "GET", "/v2/sandboxes").Query; q != "metadata=task%3Dt1" {
		t.Errorf("list query = %q", q)
	}

	out, _ = call(t, cs, "snapshot", map[string]any{"sandboxId": "sb1", "name": "before"})
	if !strings.Contains(out, "snapshotId: snap1") || f.last(t, "POST", "/sandboxes/sb1/snapshots").Body["name"] != "before" {
		t.Errorf("snapshot = %q", out)
	}

	out, _ = call(t, cs, "rollback", map[string]any{"sandboxId": "sb1", "snapshotId": "snap1", "force": true})
	if b := f.last(t, "POST", "/sandboxes/sb1/rollback").Body; b["snapshotID"] != "snap1" || b["force"] != true {
		t.Errorf("rollback body = %v", b)
	}
	if !strings.Contains(out, "back to snapshot snap1") || !strings.Contains(out, "restarted") {
		t.Errorf("rollback = %q", out)
	}

	out, isErr = call(t, cs, "fork", map[string]any{"sandboxId": "sb1", "snapshotId": "snap1", "count": 2})
	if b := f.last(t, "POST", "/sandboxes/sb1/fork").Body; b["snapshotID"] != "snap1" || b["count"] != float64(2) {
		t.Errorf("fork body = %v", b)
	}
	if isErr || !strings.Contains(out, "sandboxIds: sb2") || !strings.Contains(out, "A fork failed: no space left") {
		t.Errorf("fork = %q (error %v)", out, isErr)
	}

	out, _ = call(t, cs, "diff", map[string]any{"from": "snap1"})
	if q := f.last(t, "GET", "/snapshots/snap1/diff").Query; q != "content=true&to=live" {
		t.Errorf("diff query = %q", q)
	}
	want := "Changes from snap1 to live:sb1: 1 added, 1 modified, 0 removed.\n" +
		"A file /home/user/new.txt (3 bytes)\n" +
		"M file /home/user/a.txt (2 -> 4 bytes)\n--- a\n+++ b\n@@ -1 +1 @@\n-a\n+abc"
	if out != want {
		t.Errorf("diff = %q, want %q", out, want)
	}

	out, isErr = call(t, cs, "sandbox_kill", map[string]any{"sandboxId": "other"})
	if !isErr || out != "sandbox other not found" {
		t.Errorf("kill of a missing sandbox = %q (error %v)", out, isErr)
	}
	if out, isErr := call(t, cs, "sandbox_kill", map[string]any{"sandboxId": "sb1"}); isErr || out != "Killed sandbox sb1." {
		t.Errorf("kill = %q", out)
	}
}

func TestToolsBeforeTheDaemonIsUp(t *testing.T) {
	f, srv := newFakeAPI(t)
	f.toolsDown.Store(true)
	cs := connect(t, client.New(srv.URL, "k"), nil)

	tools := listTools(t, cs)
	for _, name := range fallbackTools {
		tl := tools[name]
		if tl == nil {
			t.Fatalf("%s not offered while the daemon is down", name)
		}
		if props := schemaOf(t, tl)["properties"].(map[string]any); props["sandboxId"] == nil {
			t.Errorf("%s fallback schema lacks sandboxId", name)
		}
	}
	// A call is still forwarded as it is.
	out, isErr := call(t, cs, "write", map[string]any{"sandboxId": "sb1", "path": "/a", "content": "x"})
	if isErr || out != "write ran" {
		t.Errorf("write through the fallback = %q (error %v)", out, isErr)
	}
	if p := f.last(t, "POST", "/sandboxes/sb1/tools/write").Body["params"].(map[string]any); p["path"] != "/a" || p["content"] != "x" {
		t.Errorf("fallback params = %v", p)
	}

	// Once the daemon answers, the next listing has its schemas.
	f.toolsDown.Store(false)
	tools = listTools(t, cs)
	if props := schemaOf(t, tools["bash"])["properties"].(map[string]any); props["command"] == nil {
		t.Errorf("bash schema still the fallback after the daemon came up")
	}
	if tools["write"] != nil {
		t.Errorf("write still offered though the daemon does not list it")
	}
}

func TestDaemonUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there any more
	cs := connect(t, client.New(url, "k"), nil)
	if tools := listTools(t, cs); tools["bash"] == nil || tools["sandbox_create"] == nil {
		t.Fatalf("tools = %v", tools)
	}
	out, isErr := call(t, cs, "bash", map[string]any{"sandboxId": "sb1", "command": "true"})
	if !isErr || !strings.Contains(out, "cannot reach warren") {
		t.Errorf("bash with no daemon = %q (error %v)", out, isErr)
	}
}

func TestWithSandboxArgs(t *testing.T) {
	for _, bad := range []string{`[]`, `{"type":"string"}`, `{"type":"object","properties":{"sandboxId":{}}}`, `{"type":"object","properties":3}`} {
		if _, err := withSandboxArgs(json.RawMessage(bad)); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
	s, err := withSandboxArgs(json.RawMessage(`{"type":"object"}`))
	if err != nil || s["required"].([]any)[0] != "sandboxId" {
		t.Errorf("schema without properties: %v %v", s, err)
	}
}
