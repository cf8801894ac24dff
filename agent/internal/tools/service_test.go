package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/agent/internal/agenttest"
	agentv1 "github.com/warrenhq/warren/api/gen/warren/agent/v1"
	"github.com/warrenhq/warren/api/gen/warren/agent/v1/agentv1connect"
)

func newClient(t *testing.T) (agentv1connect.ToolsServiceClient, *testEnv) {
	t.Helper()
	e := newEnv(t)
	mux := http.NewServeMux()
	e.s.Handle(mux, connect.WithCompression("gzip", nil, nil))
	hc, url := agenttest.Serve(t, mux)
	return agentv1connect.NewToolsServiceClient(hc, url), e
}

func TestServiceList(t *testing.T) {
	c, _ := newClient(t)
	resp, err := c.List(context.Background(), connect.NewRequest(&agentv1.ListToolsRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range resp.Msg.Tools {
		names = append(names, tl.Name)
		var schema map[string]any
		if err := json.Unmarshal(tl.ParamsSchema, &schema); err != nil || schema["type"] != "object" || tl.Description == "" {
			t.Errorf("%s: schema %s (%v)", tl.Name, tl.ParamsSchema, err)
		}
	}
	if got := strings.Join(names, ","); got != "apply_patch,bash,edit,glob,grep,ls,read,write" {
		t.Fatalf("tools %s", got)
	}
}

func TestServiceCallStreamsBashProgress(t *testing.T) {
	c, e := newClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The command prints a line, then waits for a file the test creates
	// only once that line has come as progress: so progress streams while
	// the command runs, not after.
	stream, err := c.Call(ctx, connect.NewRequest(&agentv1.CallRequest{
		Tool:   "bash",
		Params: []byte(`{"command":"echo first; while [ ! -e go ]; do sleep 0.01; done; echo second; exit 4","timeoutMs":60000}`),
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	var progress bytes.Buffer
	var result *agentv1.ToolResult
	for stream.Receive() {
		switch ev := stream.Msg().Event.(type) {
		case *agentv1.CallEvent_Progress:
			if result != nil {
				t.Fatal("progress after the result")
			}
			progress.Write(ev.Progress.Data)
			if progress.String() == "first\n" {
				writeFile(t, e.home, "go", "")
			}
		case *agentv1.CallEvent_Result:
			result = ev.Result
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if progress.String() != "first\nsecond\n" {
		t.Fatalf("progress %q", progress.String())
	}
	if result == nil || !result.IsError || result.ExitCode == nil || *result.ExitCode != 4 || result.Content != "first\nsecond\n[exit code 4]" {
		t.Fatalf("result %v", result)
	}

	// A file tool answers with the result alone; a model's mistake is a
	// result, a wrong call an RPC error.
	writeFile(t, e.home, "a.txt", "hi\n")
	got := callOnce(t, c, &agentv1.CallRequest{Tool: "read", Params: []byte(`{"path":"a.txt"}`)})
	if got.IsError || got.Content != "     1\thi" || got.ExitCode != nil {
		t.Fatalf("read: %v", got)
	}
	got = callOnce(t, c, &agentv1.CallRequest{Tool: "read", Params: []byte(`{"path":"gone.txt"}`), User: "root", Cwd: "/"})
	if !got.IsError || !strings.Contains(got.Content, "/gone.txt: no such file") {
		t.Fatalf("missing file as root in /: %v", got)
	}
	st, err := c.Call(ctx, connect.NewRequest(&agentv1.CallRequest{Tool: "frobnicate"}))
	if err == nil {
		for st.Receive() {
		}
		err = st.Err()
	}
	if connect.CodeOf(err) != connect.CodeNotFound || !strings.Contains(err.Error(), "the tools are: apply_patch, bash") {
		t.Fatalf("unknown tool: %v", err)
	}
}

func callOnce(t *testing.T, c agentv1connect.ToolsServiceClient, req *agentv1.CallRequest) *agentv1.ToolResult {
	t.Helper()
	st, err := c.Call(context.Background(), connect.NewRequest(req))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var res *agentv1.ToolResult
	n := 0
	for st.Receive() {
		n++
		res = st.Msg().GetResult()
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if n != 1 || res == nil {
		t.Fatalf("%d events, last %v", n, res)
	}
	return res
}
