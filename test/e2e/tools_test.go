package e2e

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/client"
)

func toolParamsOf(t *testing.T, v map[string]any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestTools drives the tool API end to end in a real sandbox: the catalogue,
// every tool through the daemon and the agent, the model's errors as
// results, bad calls as 4xx, streaming, per-call snapshots, the call
// records, the sandbox log, and the CLI.
func TestTools(t *testing.T) {
	t.Parallel()
	d, ctx, id := busyboxSandbox(t, 3*time.Minute)
	c := d.client()

	tools, err := c.Tools.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tl := range tools {
		names[tl.Name] = true
		var schema map[string]any
		if err := json.Unmarshal(tl.Params, &schema); err != nil || schema["type"] != "object" || tl.Description == "" {
			t.Fatalf("tool %s: description %q, schema %s (%v)", tl.Name, tl.Description, tl.Params, err)
		}
	}
	for _, n := range []string{"bash", "read", "write", "edit", "ls", "glob", "grep", "apply_patch"} {
		if !names[n] {
			t.Fatalf("GET /tools lacks %s: %v", n, names)
		}
	}

	call := func(tool string, params map[string]any) client.ToolResult {
		t.Helper()
		res, err := c.Tools.Call(ctx, id, tool, client.ToolCall{ToolCallID: "call-" + tool, Params: toolParamsOf(t, params)}, nil)
		if err != nil {
			t.Fatalf("%s %v: %v", tool, params, err)
		}
		return res
	}
	if res := call("write", map[string]any{"path": "/work/app/main.txt", "content": "alpha\nbeta\ngamma\n"}); res.IsError {
		t.Fatalf("write: %+v", res)
	}
	if res := call("read", map[string]any{"path": "/work/app/main.txt"}); res.IsError || !strings.Contains(res.Content, "beta") || !strings.Contains(res.Content, "2") {
		t.Fatalf("read: %+v", res)
	}
	if res := call("edit", map[string]any{"path": "/work/app/main.txt", "oldString": "beta", "newString": "BETA"}); res.IsError {
		t.Fatalf("edit: %+v", res)
	}
	if res := call("edit", map[string]any{"path": "/work/app/main.txt", "oldString": "no such text", "newString": "x"}); !res.IsError {
		t.Fatalf("an edit of missing text is not an error: %+v", res)
	}
	bash := call("bash", map[string]any{"command": "cat /work/app/main.txt; exit 3"})
	if !bash.IsError || bash.ExitCode == nil || *bash.ExitCode != 3 || !strings.Contains(bash.Content, "alpha\nBETA\ngamma") {
		t.Fatalf("bash: %+v", bash)
	}
	if res := call("ls", map[string]any{"path": "/work"}); res.IsError || !strings.Contains(res.Content, "app") {
		t.Fatalf("ls: %+v", res)
	}
	if res := call("glob", map[string]any{"pattern": "**/*.txt", "path": "/work"}); res.IsError || !strings.Contains(res.Content, "main.txt") {
		t.Fatalf("glob: %+v", res)
	}
	if res := call("grep", map[string]any{"pattern": "gam+a", "path": "/work"}); res.IsError || !strings.Contains(res.Content, "main.txt") {
		t.Fatalf("grep: %+v", res)
	}
	patch := "--- a/app/main.txt\n+++ b/app/main.txt\n@@ -1,3 +1,3 @@\n alpha\n-BETA\n+beta again\n gamma\n"
	res, err := c.Tools.Call(ctx, id, "apply_patch", client.ToolCall{ToolCallID: "call-apply_patch", Cwd: "/work", Params: toolParamsOf(t, map[string]any{"patch": patch})}, nil)
	if err != nil || res.IsError {
		t.Fatalf("apply_patch: %+v %v", res, err)
	}
	if res := call("read", map[string]any{"path": "/work/app/main.txt"}); !strings.Contains(res.Content, "beta again") {
		t.Fatalf("after the patch: %+v", res)
	}

	// A path that climbs out stays inside the sandbox's own root: the tools
	// run in it, not on the host's view of its files.
	if res := call("write", map[string]any{"path": "../../../../../../../warren-escape-probe", "content": "inside"}); res.IsError {
		t.Fatalf("write with ..: %+v", res)
	}
	if _, err := os.Stat("/warren-escape-probe"); !os.IsNotExist(err) {
		os.Remove("/warren-escape-probe")
		t.Fatalf("a tool wrote to the host's root: %v", err)
	}
	if res := call("read", map[string]any{"path": "/warren-escape-probe"}); !strings.Contains(res.Content, "inside") {
		t.Fatalf("the probe is not at the sandbox's root: %+v", res)
	}
	if res := call("grep", map[string]any{"pattern": "(unclosed", "path": "/work"}); !res.IsError || !strings.Contains(res.Content, "regexp") && !strings.Contains(res.Content, "pattern") {
		t.Fatalf("a pattern that does not compile: %+v", res)
	}

	// Bad calls are refused before or by the agent, with 4xx.
	for _, bad := range []struct {
		tool, body string
		want       int
	}{
		{"nosuchtool", `{"params": {}}`, 404},
		{"read", `{"params": [1, 2]}`, 400},
		{"read", `{"params": {"path": "/x", "bogus": 1}}`, 400},
		{"read", `{"params": {}}`, 400},
		{"read", `not json`, 400},
	} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+d.addr+"/sandboxes/"+id+"/tools/"+bad.tool, strings.NewReader(bad.body))
		req.Header.Set("X-API-Key", d.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != bad.want {
			t.Fatalf("%s %s: %d, want %d", bad.tool, bad.body, resp.StatusCode, bad.want)
		}
	}
	if _, err := c.Tools.Call(ctx, "nosuchsandbox", "bash", client.ToolCall{Params: json.RawMessage(`{"command":"true"}`)}, nil); client.StatusCode(err) != 404 {
		t.Fatalf("a call in an unknown sandbox: %v", err)
	}

	// Streaming: bash's output arrives as progress before the result.
	var progress bytes.Buffer
	res, err = c.Tools.Call(ctx, id, "bash", client.ToolCall{Params: toolParamsOf(t, map[string]any{"command": "echo one; sleep 0.2; echo two"})},
		func(b []byte) { progress.Write(b) })
	if err != nil || res.IsError || progress.String() != "one\ntwo\n" || !strings.Contains(res.Content, "two") {
		t.Fatalf("streamed bash: progress %q, result %+v, %v", progress.String(), res, err)
	}

	// A call that asks for a turn is followed by a snapshot.
	res, err = c.Tools.Call(ctx, id, "write", client.ToolCall{Turn: true, Params: toolParamsOf(t, map[string]any{"path": "/work/turned.txt", "content": "x"})}, nil)
	if err != nil || res.SnapshotID == "" {
		t.Fatalf("write with turn: %+v %v", res, err)
	}
	if snap, err := c.Snapshots.Get(ctx, res.SnapshotID); err != nil || snap.Turn != 1 {
		t.Fatalf("the turn snapshot: %+v %v", snap, err)
	}

	// The records: every call, in order, with the turn on the last one.
	calls, err := c.Tools.Calls(ctx, id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) < 12 || calls[0].Tool != "write" || calls[0].ToolCallID != "call-write" || len(calls[0].ParamsDigest) != 64 {
		t.Fatalf("records: %+v", calls)
	}
	last := calls[len(calls)-1]
	if last.SnapshotID != res.SnapshotID || last.Turn != 1 {
		t.Fatalf("the last record: %+v", last)
	}
	sawBash := false
	for _, rc := range calls {
		sawBash = sawBash || (rc.Tool == "bash" && rc.ExitCode != nil && *rc.ExitCode == 3 && rc.IsError)
	}
	if !sawBash {
		t.Fatalf("no record of the failing bash call: %+v", calls)
	}
	waitLog(t, c, id, "two") // bash's output is in the sandbox's log
	waitLog(t, c, id, "tool apply_patch: ok in "+itoaMs(calls, "apply_patch")+" ms (call call-apply_patch)")

	// A sandbox made with snapshotEveryToolCall snapshots after each call.
	sb2, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", SnapshotEveryToolCall: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 2; i++ {
		res, err := c.Tools.Call(ctx, sb2.SandboxID, "bash", client.ToolCall{Params: json.RawMessage(`{"command":"date >> /log"}`)}, nil)
		if err != nil || res.SnapshotID == "" {
			t.Fatalf("call %d in a snapshotEveryToolCall sandbox: %+v %v", i, res, err)
		}
	}

	// The CLI.
	if out := d.mustCLI("tool", "call", id, "bash", "-p", "command=echo hi from the cli"); out != "hi from the cli\n" {
		t.Fatalf("warren tool call bash: %q", out)
	}
	if _, _, code := d.cli("", "tool", "call", id, "bash", "-p", "command=exit 7"); code != 7 {
		t.Fatalf("warren tool call passes bash's exit code on: %d", code)
	}
	if out := d.mustCLI("tool", id, "read", "-p", "path=/work/app/main.txt", "-p", "limit=1"); !strings.Contains(out, "alpha") || strings.Contains(out, "gamma") {
		t.Fatalf("warren tool call read with a numeric param: %q", out)
	}
	if out := d.mustCLI("tools"); !strings.Contains(out, "apply_patch") || !strings.Contains(out, "path") {
		t.Fatalf("warren tool ls:\n%s", out)
	}
	if out := d.mustCLI("tool", "calls", id); !strings.Contains(out, "call-edit") || !strings.Contains(out, "error") {
		t.Fatalf("warren tool calls:\n%s", out)
	}
}

// itoaMs is the duration of the first recorded call of a tool, as printed
// in the log.
func itoaMs(calls []client.ToolCallRecord, tool string) string {
	for _, c := range calls {
		if c.Tool == tool {
			b, _ := json.Marshal(c.DurationMs)
			return string(b)
		}
	}
	return "?"
}
