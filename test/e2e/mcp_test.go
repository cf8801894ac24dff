package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/warrenhq/warren/internal/testutil"
)

// mcpTools are the tools warren's MCP server offers.
var mcpTools = []string{"apply_patch", "bash", "diff", "edit", "fork", "glob", "grep", "ls", "read", "rollback",
	"sandbox_create", "sandbox_kill", "sandbox_list", "snapshot", "write"}

// TestMCPStdio drives `warren mcp` as an MCP client would: a subprocess
// spoken to over stdio with the official Go SDK's client.
func TestMCPStdio(t *testing.T) {
	t.Parallel()
	d := busyboxDaemon(t)
	ctx := ctxT(t, 5*time.Minute)

	cmd := exec.Command(filepath.Join(d.bin, "warren"), "mcp")
	cmd.Env = []string{"WARREN_URL=http://" + d.addr, "WARREN_API_KEY=" + d.key, "PATH=/usr/bin:/bin"}
	stderr := &testutil.SyncBuffer{}
	cmd.Stderr = stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect to warren mcp: %v\nstderr: %s", err, stderr)
	}
	t.Cleanup(func() {
		// Closing stdin ends `warren mcp`; Close waits for it.
		if err := cs.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
		if t.Failed() {
			t.Logf("warren mcp stderr:\n%s", stderr)
		}
	})
	if got := cs.InitializeResult().ServerInfo.Name; got != "warren" {
		t.Errorf("server name = %q", got)
	}
	exerciseMCP(t, ctx, cs)
	if cmd.ProcessState != nil {
		t.Errorf("warren mcp exited during the session: %v", cmd.ProcessState)
	}
}

// TestMCPHTTP drives the daemon's /mcp endpoint with the API key sent as a
// bearer token, as MCP clients do.
func TestMCPHTTP(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.start()
	endpoint := "http://" + d.addr + "/mcp"
	resp, err := http.Post(endpoint, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		t.Fatal("POST /mcp: 404, the daemon serves no /mcp")
	}
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("POST /mcp without a key: %d, want 401", resp.StatusCode)
	}
	d.mustCLI("template", "build", "bb", "--busybox", "--data-dir", d.dataDir)
	ctx := ctxT(t, 5*time.Minute)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e"}, nil).Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   endpoint,
		HTTPClient: &http.Client{Transport: bearer(d.key)},
	}, nil)
	if err != nil {
		t.Fatalf("connect to /mcp: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	exerciseMCP(t, ctx, cs)
}

type bearer string

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

// exerciseMCP lists the tools, then runs a sandbox's life through them:
// create, bash, write, read, snapshot, edit, grep, diff, rollback, a turn,
// fork, list and kill.
func exerciseMCP(t *testing.T, ctx context.Context, cs *mcp.ClientSession) {
	t.Helper()
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	var bashSchema string
	for _, tl := range list.Tools {
		names = append(names, tl.Name)
		if tl.Name == "bash" {
			b, _ := jsonString(tl.InputSchema)
			bashSchema = b
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, mcpTools) {
		t.Fatalf("tools = %v, want %v", names, mcpTools)
	}
	// The agent's own schema, with sandboxId added.
	for _, p := range []string{`"command"`, `"sandboxId"`, `"turn"`} {
		if !strings.Contains(bashSchema, p) {
			t.Errorf("bash's schema lacks %s: %s", p, bashSchema)
		}
	}

	call := func(name string, args map[string]any) (string, bool) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s %v: %v", name, args, err)
		}
		var b strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				b.WriteString(tc.Text)
			}
		}
		t.Logf("%s %v -> (error %v) %q", name, args, res.IsError, b.String())
		return b.String(), res.IsError
	}
	mustCall := func(name string, args map[string]any) string {
		t.Helper()
		out, isErr := call(name, args)
		if isErr {
			t.Fatalf("%s %v: tool error: %s", name, args, out)
		}
		return out
	}

	out := mustCall("sandbox_create", map[string]any{"template": "bb", "metadata": map[string]string{"by": "mcp-e2e"}})
	id := field(t, out, "sandboxId")

	if out := mustCall("bash", map[string]any{"sandboxId": id, "command": "echo hi"}); !strings.Contains(out, "hi") {
		t.Errorf("bash echo hi = %q", out)
	}
	if out, isErr := call("bash", map[string]any{"sandboxId": id, "command": "echo oops >&2; exit 3"}); !isErr || !strings.Contains(out, "oops") || !strings.Contains(out, "3") {
		t.Errorf("failing bash = %q (error %v), want a tool error with its output and status", out, isErr)
	}

	const file = "/workspace/mcp/notes.txt"
	mustCall("write", map[string]any{"sandboxId": id, "path": file, "content": "alpha\nbeta\n"})
	if out := mustCall("read", map[string]any{"sandboxId": id, "path": file}); !strings.Contains(out, "alpha") || !strings.Contains(out, "beta") {
		t.Errorf("read = %q", out)
	}

	snap := field(t, mustCall("snapshot", map[string]any{"sandboxId": id, "name": "before-edit"}), "snapshotId")

	mustCall("edit", map[string]any{"sandboxId": id, "path": file, "oldString": "beta", "newString": "gamma"})
	if out := mustCall("grep", map[string]any{"sandboxId": id, "pattern": "gam+a", "path": "/workspace"}); !strings.Contains(out, "notes.txt") {
		t.Errorf("grep = %q, want the edited file", out)
	}
	if out := mustCall("diff", map[string]any{"from": snap}); !strings.Contains(out, "M file "+file) || !strings.Contains(out, "+gamma") {
		t.Errorf("diff = %q, want the edit", out)
	}
	// A bad edit is the model's mistake: a tool error, the file unharmed.
	if out, isErr := call("edit", map[string]any{"sandboxId": id, "path": file, "oldString": "no such text", "newString": "x"}); !isErr {
		t.Errorf("edit of missing text = %q, want a tool error", out)
	}

	mustCall("rollback", map[string]any{"sandboxId": id, "snapshotId": snap})
	if out := mustCall("read", map[string]any{"sandboxId": id, "path": file}); !strings.Contains(out, "beta") || strings.Contains(out, "gamma") {
		t.Errorf("read after rollback = %q, want the snapshot's content", out)
	}

	// A call with turn: true names the snapshot taken after it.
	if out := mustCall("bash", map[string]any{"sandboxId": id, "command": "echo turned > /workspace/turn.txt", "turn": true}); !strings.Contains(out, "[snapshot ") {
		t.Errorf("bash with turn = %q, want the turn snapshot named", out)
	}
	// A fork of the snapshot has its files; the fork is its own sandbox.
	forkID := field(t, mustCall("fork", map[string]any{"sandboxId": id, "snapshotId": snap}), "sandboxIds")
	if out := mustCall("read", map[string]any{"sandboxId": forkID, "path": file}); !strings.Contains(out, "beta") {
		t.Errorf("read in the fork = %q", out)
	}
	mustCall("sandbox_kill", map[string]any{"sandboxId": forkID})

	if out := mustCall("sandbox_list", map[string]any{"metadata": map[string]string{"by": "mcp-e2e"}}); !strings.Contains(out, id) {
		t.Errorf("sandbox_list = %q, want %s", out, id)
	}
	mustCall("sandbox_kill", map[string]any{"sandboxId": id})
	if out := mustCall("sandbox_list", map[string]any{"metadata": map[string]string{"by": "mcp-e2e"}}); strings.Contains(out, id) {
		t.Errorf("sandbox_list after kill = %q", out)
	}
	// The daemon's 404 reaches the model as a tool error.
	if out, isErr := call("bash", map[string]any{"sandboxId": id, "command": "true"}); !isErr || !strings.Contains(out, id) {
		t.Errorf("bash in a killed sandbox = %q (error %v)", out, isErr)
	}
}

// field finds "name: value" in a tool's answer.
func field(t *testing.T, out, name string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + name + `: (\S+)$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no %s in %q", name, out)
	}
	return m[1]
}

func jsonString(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}
