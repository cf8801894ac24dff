package mcpserver

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/warrenhq/warren/client"
)

// withHeader adds a header to every request a client sends.
type withHeader struct {
	name, value string
}

func (h withHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(h.name, h.value)
	return http.DefaultTransport.RoundTrip(r)
}

func httpSession(t *testing.T, endpoint string, h withHeader) *mcp.ClientSession {
	t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint:   endpoint,
		HTTPClient: &http.Client{Transport: h},
		MaxRetries: -1,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// rawPOST sends one JSON-RPC message to the MCP endpoint and returns the
// status.
func rawPOST(t *testing.T, endpoint string, header http.Header, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("POST", endpoint, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = header
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	n, _ := resp.Body.Read(buf)
	b.Write(buf[:n])
	return resp.StatusCode, b.String()
}

const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

func TestHTTPHandler(t *testing.T) {
	f, api := newFakeAPI(t)
	mcpSrv := httptest.NewServer(HTTPHandler(api.URL, HTTPOptions{Version: "test"}))
	t.Cleanup(mcpSrv.Close)
	endpoint := mcpSrv.URL + "/mcp"

	// No key: 401 before any MCP handling.
	code, body := rawPOST(t, endpoint, http.Header{}, initialize)
	if code != http.StatusUnauthorized || !strings.Contains(body, "missing API key") {
		t.Fatalf("without a key: %d %s", code, body)
	}
	var e client.Error
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Code != 401 {
		t.Errorf("401 body = %s", body)
	}
	if n := len(f.recorded()); n != 0 {
		t.Errorf("the API was called %d times for an unauthenticated request", n)
	}

	// A Bearer key: the session's calls carry it as X-API-Key.
	cs1 := httpSession(t, endpoint, withHeader{"Authorization", "Bearer key1"})
	tools, err := cs1.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var haveBash bool
	for _, tl := range tools.Tools {
		haveBash = haveBash || tl.Name == "bash"
	}
	if !haveBash {
		t.Fatalf("no bash among %d tools", len(tools.Tools))
	}
	res, err := cs1.CallTool(context.Background(), &mcp.CallToolParams{Name: "bash", Arguments: map[string]any{"sandboxId": "sb1", "command": "echo hi"}})
	if err != nil || res.IsError || res.Content[0].(*mcp.TextContent).Text != "bash ran" {
		t.Fatalf("bash over HTTP: %v %+v", err, res)
	}
	if k := f.last(t, "POST", "/sandboxes/sb1/tools/bash").Key; k != "key1" {
		t.Errorf("bash sent key %q, want key1", k)
	}

	// An X-API-Key session: its own key.
	cs2 := httpSession(t, endpoint, withHeader{"X-API-Key", "key2"})
	res, err = cs2.CallTool(context.Background(), &mcp.CallToolParams{Name: "sandbox_kill", Arguments: map[string]any{"sandboxId": "sb1"}})
	if err != nil || res.IsError {
		t.Fatalf("sandbox_kill over HTTP: %v %+v", err, res)
	}
	if k := f.last(t, "DELETE", "/sandboxes/sb1").Key; k != "key2" {
		t.Errorf("kill sent key %q, want key2", k)
	}

	// A session belongs to the key that opened it.
	list := `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`
	h := http.Header{"X-Api-Key": {"key2"}, "Mcp-Session-Id": {cs1.ID()}, "Mcp-Protocol-Version": {cs1.InitializeResult().ProtocolVersion}}
	if code, body := rawPOST(t, endpoint, h, list); code != http.StatusForbidden {
		t.Errorf("session of key1 used with key2: %d %s", code, body)
	}
	h.Set("X-Api-Key", "key1")
	if code, body := rawPOST(t, endpoint, h, list); code != http.StatusOK || !strings.Contains(body, "sandbox_create") {
		t.Errorf("session of key1 used with key1: %d %s", code, body)
	}
}

func TestAPIKey(t *testing.T) {
	for _, c := range []struct {
		h    http.Header
		want string
	}{
		{http.Header{"X-Api-Key": {"a"}}, "a"},
		{http.Header{"Authorization": {"Bearer b"}}, "b"},
		{http.Header{"Authorization": {"bearer  c "}}, "c"},
		{http.Header{"X-Api-Key": {"a"}, "Authorization": {"Bearer b"}}, "a"},
		{http.Header{"Authorization": {"Basic Zm9v"}}, ""},
		{http.Header{}, ""},
	} {
		if got := APIKey(&http.Request{Header: c.h}); got != c.want {
			t.Errorf("APIKey(%v) = %q, want %q", c.h, got, c.want)
		}
	}
}

func TestLoopbackURL(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:3000": "http://127.0.0.1:3000",
		"0.0.0.0:3000":   "http://127.0.0.1:3000",
		"[::]:3000":      "http://[::1]:3000",
		"10.1.2.3:80":    "http://10.1.2.3:80",
	} {
		a, err := net.ResolveTCPAddr("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := LoopbackURL(a); got != want {
			t.Errorf("LoopbackURL(%s) = %s, want %s", addr, got, want)
		}
	}
}
