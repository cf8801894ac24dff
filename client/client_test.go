package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
)

// newServer starts an httptest server running h and a Client pointed at it.
func newServer(t *testing.T, h http.HandlerFunc) *Client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return New(srv.URL, "e2b_test", WithHTTPClient(srv.Client()))
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func TestErrorMapping(t *testing.T) {
	tests := []struct {
		name     string
		status   int
		body     string
		wantCode int
		wantMsg  string
	}{
		{"json error", 404, `{"code":404,"message":"sandbox abc not found"}`, 404, "sandbox abc not found"},
		{"json without code", 409, `{"message":"busy"}`, 409, "busy"},
		{"plain text", 404, "404 page not found\n", 404, "Not Found: 404 page not found"},
		{"html page", 502, "<html><body>bad gateway</body></html>", 502, "Bad Gateway"},
		{"empty body", 401, "", 401, "Unauthorized"},
		{"unknown status", 599, "", 599, "HTTP status 599"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newServer(t, func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.body)
			})
			_, err := c.Sandboxes.Get(context.Background(), "abc")
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v (%T), want *Error", err, err)
			}
			if e.Code != tt.wantCode || e.Message != tt.wantMsg {
				t.Fatalf("got {%d %q}, want {%d %q}", e.Code, e.Message, tt.wantCode, tt.wantMsg)
			}
			if StatusCode(err) != tt.wantCode {
				t.Fatalf("StatusCode = %d", StatusCode(err))
			}
		})
	}
}

func TestUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	_, err := New(url, "").Meta.Health(context.Background())
	if err == nil || !strings.Contains(err.Error(), "cannot reach warren at "+url) {
		t.Fatalf("err = %v", err)
	}
	if StatusCode(err) != 0 {
		t.Fatalf("a transport error has no status code")
	}
	if _, err := New("127.0.0.1:3000", "").Meta.Health(context.Background()); err == nil || !strings.Contains(err.Error(), "invalid warren URL") {
		t.Fatalf("err = %v", err)
	}
}

func TestCreateSandboxSendsKeyAndBody(t *testing.T) {
	c := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/sandboxes" {
			t.Errorf("got %s %s", r.Method, r.URL.Path)
		}
		if got := r.Header.Get("X-API-Key"); got != "e2b_test" {
			t.Errorf("X-API-Key = %q", got)
		}
		var in NewSandbox
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			t.Errorf("decode: %v", err)
		}
		if in.TemplateID != "base" || in.Limits == nil || in.Limits.MemoryMB != 256 || *in.Timeout != 0 {
			t.Errorf("body = %+v", in)
		}
		writeJSON(w, http.StatusCreated, Sandbox{SandboxID: "sb1", TemplateID: "base"})
	})
	zero := int64(0)
	s, err := c.Sandboxes.Create(context.Background(), NewSandbox{TemplateID: "base", Timeout: &zero, Limits: &Limits{MemoryMB: 256}})
	if err != nil || s.SandboxID != "sb1" {
		t.Fatalf("CreateSandbox = %+v, %v", s, err)
	}
}

func TestListSandboxesQueryAndNextToken(t *testing.T) {
	c := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v2/sandboxes" {
			t.Errorf("path = %s", r.URL.Path)
		}
		q := r.URL.Query()
		if got, want := r.URL.RawQuery, "limit=2&metadata=a%3D1%26b%3Dx%252By&nextToken=t1&state=running&state=paused"; got != want {
			t.Errorf("query = %s, want %s", got, want)
		}
		if q.Get("metadata") != "a=1&b=x%2By" {
			t.Errorf("metadata = %q", q.Get("metadata"))
		}
		w.Header().Set("X-Next-Token", "t2")
		writeJSON(w, 200, []ListedSandbox{{Sandbox: Sandbox{SandboxID: "s1"}, State: "running"}})
	})
	got, next, err := c.Sandboxes.List(context.Background(), ListOptions{
		Metadata: map[string]string{"b": "x+y", "a": "1"}, States: []string{"running", "paused"}, Limit: 2, NextToken: "t1",
	})
	if err != nil || next != "t2" || len(got) != 1 || got[0].SandboxID != "s1" {
		t.Fatalf("ListSandboxes = %+v, %q, %v", got, next, err)
	}
}

func TestExecStreams(t *testing.T) {
	code := int32(3)
	c := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/sandboxes/sb%201/exec" && r.URL.EscapedPath() != "/sandboxes/sb%201/exec" {
			t.Errorf("path = %s", r.URL.EscapedPath())
		}
		if r.URL.Query().Get("wait") != "" {
			t.Errorf("stream call sent wait")
		}
		var req ExecRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		if len(req.Cmd) != 2 || string(req.Stdin) != "in" {
			t.Errorf("request = %+v", req)
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		enc := json.NewEncoder(w)
		_ = enc.Encode(ExecEvent{Type: "start", PID: 7})
		_ = enc.Encode(ExecEvent{Type: "stdout", Data: []byte("hello ")})
		_ = enc.Encode(ExecEvent{Type: "stderr", Data: []byte("oops")})
		w.(http.Flusher).Flush()
		_ = enc.Encode(ExecEvent{Type: "stdout", Data: []byte("world")})
		_ = enc.Encode(ExecEvent{Type: "exit", ExitCode: &code})
	})
	var out, errOut bytes.Buffer
	ev, err := c.Commands.Exec(context.Background(), "sb 1", ExecRequest{Cmd: []string{"sh", "-c"}, Stdin: []byte("in")}, &out, &errOut)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Type != "exit" || ev.ExitCode == nil || *ev.ExitCode != 3 {
		t.Fatalf("exit event = %+v", ev)
	}
	if out.String() != "hello world" || errOut.String() != "oops" {
		t.Fatalf("stdout %q stderr %q", out.String(), errOut.String())
	}
}

func TestExecStreamWithoutExit(t *testing.T) {
	c := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"type":"stdout","data":"aGk="}`+"\n")
	})
	var out bytes.Buffer
	_, err := c.Commands.Exec(context.Background(), "sb", ExecRequest{Command: "echo hi"}, &out, nil)
	if err == nil || !strings.Contains(err.Error(), "without an exit event") {
		t.Fatalf("err = %v", err)
	}
	if out.String() != "hi" {
		t.Fatalf("stdout = %q", out.String())
	}
}

func TestExecWait(t *testing.T) {
	c := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("wait") != "true" {
			t.Errorf("wait not set")
		}
		writeJSON(w, 200, ExecResult{ExitCode: 1, Stdout: "a", Stderr: "b"})
	})
	res, err := c.Commands.ExecWait(context.Background(), "sb", ExecRequest{Command: "false"})
	if err != nil || res.ExitCode != 1 || res.Stdout != "a" {
		t.Fatalf("ExecWait = %+v, %v", res, err)
	}
}

func TestFiles(t *testing.T) {
	c := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		switch r.Method + " " + r.URL.Path {
		case "GET /sandboxes/sb/files":
			w.Header().Set("Content-Type", "application/octet-stream")
			_, _ = io.WriteString(w, "content of "+q.Get("path"))
		case "PUT /sandboxes/sb/files":
			b, _ := io.ReadAll(r.Body)
			if string(b) != "data" || q.Get("mode") != "4755" || q.Get("user") != "root" {
				t.Errorf("put: body %q query %v", b, q)
			}
			if ct := r.Header.Get("Content-Type"); ct != "application/octet-stream" {
				t.Errorf("put content type %q", ct)
			}
			writeJSON(w, 200, EntryInfo{Name: "f", Path: q.Get("path"), Size: 4})
		case "DELETE /sandboxes/sb/files":
			w.WriteHeader(http.StatusNoContent)
		case "GET /sandboxes/sb/files/stat", "POST /sandboxes/sb/files/mkdir":
			writeJSON(w, 200, EntryInfo{Path: q.Get("path")})
		case "GET /sandboxes/sb/files/list":
			if q.Get("depth") != "2" {
				t.Errorf("depth = %q", q.Get("depth"))
			}
			writeJSON(w, 200, []EntryInfo{{Name: "a"}, {Name: "b"}})
		case "POST /sandboxes/sb/files/move":
			var m MoveRequest
			_ = json.NewDecoder(r.Body).Decode(&m)
			writeJSON(w, 200, EntryInfo{Path: m.Destination})
		default:
			t.Errorf("unexpected %s %s", r.Method, r.URL)
			w.WriteHeader(500)
		}
	})
	ctx := context.Background()
	rc, err := c.Files.Read(ctx, "sb", "/etc/a b&c")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if string(b) != "content of /etc/a b&c" {
		t.Fatalf("ReadFile = %q", b)
	}
	info, err := c.Files.Write(ctx, "sb", "/x", strings.NewReader("data"), 0o755|os.ModeSetuid, "root")
	if err != nil || info.Size != 4 {
		t.Fatalf("WriteFile = %+v, %v", info, err)
	}
	if err := c.Files.Remove(ctx, "sb", "/x"); err != nil {
		t.Fatal(err)
	}
	if info, err := c.Files.Stat(ctx, "sb", "/s"); err != nil || info.Path != "/s" {
		t.Fatalf("Stat = %+v, %v", info, err)
	}
	if info, err := c.Files.MakeDir(ctx, "sb", "/d"); err != nil || info.Path != "/d" {
		t.Fatalf("MakeDir = %+v, %v", info, err)
	}
	if list, err := c.Files.List(ctx, "sb", "/", 2); err != nil || len(list) != 2 {
		t.Fatalf("ListDir = %+v, %v", list, err)
	}
	if info, err := c.Files.Move(ctx, "sb", "/a", "/b"); err != nil || info.Path != "/b" {
		t.Fatalf("Move = %+v, %v", info, err)
	}
}

func TestTemplatesAndKeys(t *testing.T) {
	c := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.Method + " " + r.URL.EscapedPath() {
		case "GET /templates":
			writeJSON(w, 200, []Template{{TemplateID: "base"}})
		case "DELETE /templates/my%2Ft", "DELETE /api-keys/k1":
			w.WriteHeader(http.StatusNoContent)
		case "POST /api-keys":
			var in NewAPIKey
			_ = json.NewDecoder(r.Body).Decode(&in)
			writeJSON(w, 201, APIKey{ID: "k1", Team: in.Team, Name: in.Name, Key: "e2b_secret"})
		case "GET /api-keys":
			writeJSON(w, 200, []APIKey{{ID: "k1"}})
		default:
			t.Errorf("unexpected %s %s", r.Method, r.URL.EscapedPath())
			w.WriteHeader(500)
		}
	})
	ctx := context.Background()
	if ts, err := c.Templates.List(ctx); err != nil || len(ts) != 1 {
		t.Fatalf("ListTemplates = %v, %v", ts, err)
	}
	if err := c.Templates.Delete(ctx, "my/t"); err != nil {
		t.Fatal(err)
	}
	k, err := c.APIKeys.Create(ctx, NewAPIKey{Team: "t", Name: "n"})
	if err != nil || k.Key != "e2b_secret" || k.Team != "t" {
		t.Fatalf("CreateAPIKey = %+v, %v", k, err)
	}
	if ks, err := c.APIKeys.List(ctx); err != nil || len(ks) != 1 {
		t.Fatalf("ListAPIKeys = %v, %v", ks, err)
	}
	if err := c.APIKeys.Revoke(ctx, "k1"); err != nil {
		t.Fatal(err)
	}
}

func TestUnixMode(t *testing.T) {
	for mode, want := range map[os.FileMode]string{0o644: "0644", 0o755 | os.ModeSticky: "1755", 0o700 | os.ModeSetgid: "2700"} {
		if got := unixMode(mode); got != want {
			t.Errorf("unixMode(%v) = %s, want %s", mode, got, want)
		}
	}
}
