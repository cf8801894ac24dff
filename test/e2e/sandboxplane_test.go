package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/accesstoken"
)

// TestSandboxPlane checks E2B's routes as the Python SDK (which cannot be
// installed here) and plain HTTP clients use them: create and connect on
// the v1 paths, the key shape, and who may use a sandbox's envd API.
func TestSandboxPlane(t *testing.T) {
	t.Parallel()
	d := busyboxDaemon(t, "--max-upload-mb", "1")
	ctx := ctxT(t, 3*time.Minute)
	base := "http://" + d.addr

	if !regexp.MustCompile(`^e2b_[0-9a-f]+$`).MatchString(d.key) {
		t.Fatalf("API key %q does not match the Python SDK's ^e2b_[0-9a-f]+$", d.key)
	}
	call := func(method, path string, hdr map[string]string, body io.Reader) (int, []byte) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, base+path, body)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	type sandbox struct {
		SandboxID, TemplateID, ClientID, EnvdVersion, EnvdAccessToken, Domain string
	}
	create := func() sandbox {
		t.Helper()
		// The Python SDK's create: POST /sandboxes with secure and metadata.
		code, b := call("POST", "/sandboxes", map[string]string{"X-API-KEY": d.key, "Content-Type": "application/json"},
			strings.NewReader(`{"templateID":"bb","timeout":120,"secure":true,"metadata":{"sdk":"python"}}`))
		if code != 201 {
			t.Fatalf("POST /sandboxes: %d %s", code, b)
		}
		var sb sandbox
		if err := json.Unmarshal(b, &sb); err != nil {
			t.Fatal(err)
		}
		if sb.SandboxID == "" || sb.ClientID == "" || sb.EnvdVersion != "0.6.4" || sb.EnvdAccessToken == "" || sb.TemplateID != "bb" || sb.Domain == "" {
			t.Fatalf("create answer %s lacks E2B's fields", b)
		}
		return sb
	}
	a, other := create(), create()
	if a.EnvdAccessToken == other.EnvdAccessToken {
		t.Fatal("two sandboxes got the same access token")
	}

	// connect on the v1 path: 200 while running, with the same token.
	code, b := call("POST", "/sandboxes/"+a.SandboxID+"/connect", map[string]string{"X-API-KEY": d.key}, strings.NewReader(`{"timeout":120}`))
	var conn sandbox
	_ = json.Unmarshal(b, &conn)
	if code != 200 || conn.EnvdAccessToken != a.EnvdAccessToken {
		t.Fatalf("connect to a running sandbox: %d %s", code, b)
	}

	envd := func(id string, hdr map[string]string) map[string]string {
		h := map[string]string{"E2b-Sandbox-Id": id, "E2b-Sandbox-Port": "49983"}
		for k, v := range hdr {
			h[k] = v
		}
		return h
	}
	for what, tc := range map[string]struct {
		hdr  map[string]string
		want int
	}{
		"own token":             {envd(a.SandboxID, map[string]string{"X-Access-Token": a.EnvdAccessToken}), 204},
		"team's API key":        {envd(a.SandboxID, map[string]string{"X-API-Key": d.key}), 204},
		"no credential":         {envd(a.SandboxID, nil), 401},
		"wrong token":           {envd(a.SandboxID, map[string]string{"X-Access-Token": "nope"}), 401},
		"other sandbox's token": {envd(a.SandboxID, map[string]string{"X-Access-Token": other.EnvdAccessToken}), 401},
		"unknown sandbox":       {envd("nosuchsandbox", map[string]string{"X-Access-Token": a.EnvdAccessToken}), 502},
		"bad port":              {map[string]string{"E2b-Sandbox-Id": a.SandboxID, "E2b-Sandbox-Port": "x"}, 400},
	} {
		if code, b := call("GET", "/health", tc.hdr, nil); code != tc.want {
			t.Errorf("envd /health, %s: got %d %s, want %d", what, code, b, tc.want)
		}
	}
	// Without sandbox headers, /health is the daemon's and envd paths are refused clearly.
	if code, _ := call("GET", "/health", nil, nil); code != 200 {
		t.Errorf("daemon /health: %d", code)
	}
	if code, b := call("POST", "/process.Process/List", map[string]string{"Content-Type": "application/json"}, strings.NewReader(`{}`)); code != 400 || !strings.Contains(string(b), "E2b-Sandbox-Id") {
		t.Errorf("envd RPC without sandbox header: %d %s", code, b)
	}

	tok := envd(a.SandboxID, map[string]string{"X-Access-Token": a.EnvdAccessToken, "Content-Type": "application/json"})
	// Connect unary RPCs with the JSON codec, as the SDKs send them.
	code, b = call("POST", "/filesystem.Filesystem/Stat", tok, strings.NewReader(`{"path":"/etc/passwd"}`))
	if code != 200 || !strings.Contains(string(b), `"name":"passwd"`) || !strings.Contains(string(b), "FILE_TYPE_FILE") {
		t.Errorf("Stat: %d %s", code, b)
	}
	code, b = call("POST", "/filesystem.Filesystem/Stat", tok, strings.NewReader(`{"path":`))
	if code != 400 || !strings.Contains(string(b), `"code":"invalid_argument"`) {
		t.Errorf("malformed JSON: %d %s", code, b)
	}
	code, b = call("POST", "/process.Process/NoSuchMethod", tok, strings.NewReader(`{}`))
	if code != 404 {
		t.Errorf("unknown RPC: %d %s", code, b)
	}
	code, b = call("POST", "/filesystem.Filesystem/Stat", envd(a.SandboxID, map[string]string{"Content-Type": "application/json"}), strings.NewReader(`{"path":"/"}`))
	if code != 401 || !strings.Contains(string(b), `"code":"unauthenticated"`) {
		t.Errorf("RPC without token: %d %s", code, b)
	}
	// A malformed streaming envelope (a length that runs past the body).
	code, b = call("POST", "/process.Process/Start", envd(a.SandboxID, map[string]string{"X-Access-Token": a.EnvdAccessToken, "Content-Type": "application/connect+json"}),
		bytes.NewReader([]byte{0, 0, 0, 1, 0, '{'}))
	if code == 200 && !strings.Contains(string(b), "error") {
		t.Errorf("truncated envelope: %d %s", code, b)
	}

	// Uploads: the limit (1 MiB here) is enforced by the daemon; nothing is left behind.
	up := envd(a.SandboxID, map[string]string{"X-Access-Token": a.EnvdAccessToken, "Content-Type": "application/octet-stream"})
	if code, b := call("POST", "/files?path=/tmp/big", up, bytes.NewReader(make([]byte, 2<<20))); code != 413 {
		t.Errorf("2 MiB upload over a 1 MiB limit: %d %s", code, b)
	}
	if code, _ := call("GET", "/files?path=/tmp/big", up, nil); code != 404 {
		t.Errorf("a refused upload left /tmp/big (GET: %d)", code)
	}
	if code, b := call("POST", "/files?path=/tmp/small&username=root", up, strings.NewReader("hello")); code != 200 || !strings.Contains(string(b), `"path":"/tmp/small"`) {
		t.Errorf("octet-stream upload: %d %s", code, b)
	}
	// The same limit holds for warren's own PUT /files, declared or
	// streamed (no Content-Length).
	own := map[string]string{"X-API-Key": d.key}
	for name, body := range map[string]func() io.Reader{
		"declared": func() io.Reader { return bytes.NewReader(make([]byte, 2<<20)) },
		"streamed": func() io.Reader { return io.MultiReader(bytes.NewReader(make([]byte, 2<<20))) },
	} {
		if code, b := call("PUT", "/sandboxes/"+a.SandboxID+"/files?path=/tmp/big2", own, body()); code != 413 || !strings.Contains(string(b), "--max-upload-mb") {
			t.Errorf("PUT /files, 2 MiB %s over a 1 MiB limit: %d %s", name, code, b)
		}
	}
	if code, _ := call("GET", "/sandboxes/"+a.SandboxID+"/files?path=/tmp/big2", own, nil); code != 404 {
		t.Errorf("a refused PUT /files left /tmp/big2 (GET: %d)", code)
	}
	if code, b := call("PUT", "/sandboxes/"+a.SandboxID+"/files?path=/tmp/small2", own, strings.NewReader("hello")); code != 200 {
		t.Errorf("PUT /files under the limit: %d %s", code, b)
	}

	// Signed URLs carry no sandbox header: the signature finds the sandbox.
	signed := func(method, path, user, token string, exp string) string {
		s := accesstoken.Signed{Path: path, Operation: "read", User: user, Expiration: exp}
		if method == "POST" {
			s.Operation = "write"
		}
		q := url.Values{"path": {path}, "username": {user}, "signature": {accesstoken.Sign(s, token)}}
		if exp != "" {
			q.Set("signature_expiration", exp)
		}
		return "/files?" + q.Encode()
	}
	if code, b := call("GET", signed("GET", "/tmp/small", "root", a.EnvdAccessToken, ""), nil, nil); code != 200 || string(b) != "hello" {
		t.Errorf("signed download: %d %q", code, b)
	}
	if code, _ := call("GET", signed("GET", "/tmp/small", "root", other.EnvdAccessToken, ""), nil, nil); code != 404 {
		// other's token signs for other's sandbox, which has no such file.
		t.Errorf("download signed for the other sandbox: %d, want its 404", code)
	}
	if code, _ := call("GET", signed("GET", "/tmp/small", "root", "forged", ""), nil, nil); code != 401 {
		t.Errorf("forged signature: %d, want 401", code)
	}
	if code, _ := call("POST", signed("GET", "/tmp/small", "root", a.EnvdAccessToken, ""), map[string]string{"Content-Type": "application/octet-stream"}, strings.NewReader("x")); code != 401 {
		t.Errorf("a read signature used to write: %d, want 401", code)
	}
	past := "1000000000"
	if code, _ := call("GET", signed("GET", "/tmp/small", "root", a.EnvdAccessToken, past), nil, nil); code != 401 {
		t.Errorf("expired signature: %d, want 401", code)
	}
	if code, b := call("POST", signed("POST", "/tmp/up", "root", a.EnvdAccessToken, ""), map[string]string{"Content-Type": "application/octet-stream"}, strings.NewReader("up")); code != 200 {
		t.Errorf("signed upload: %d %s", code, b)
	}

	// Pause, then connect resumes: 201.
	if code, b := call("POST", "/sandboxes/"+a.SandboxID+"/pause", map[string]string{"X-API-KEY": d.key}, nil); code != 204 {
		t.Fatalf("pause: %d %s", code, b)
	}
	if code, b := call("POST", "/sandboxes/"+a.SandboxID+"/pause", map[string]string{"X-API-KEY": d.key}, nil); code != 409 {
		t.Errorf("pause of a paused sandbox: %d %s, want 409", code, b)
	}
	if code, b := call("POST", "/sandboxes/"+a.SandboxID+"/connect", map[string]string{"X-API-KEY": d.key}, strings.NewReader(`{}`)); code != 201 {
		t.Errorf("connect to a paused sandbox: %d %s, want 201", code, b)
	}
	if code, b := call("GET", "/files?path=/tmp/up", up, nil); code != 200 || string(b) != "up" {
		t.Errorf("file after resume: %d %q", code, b)
	}

	// After a kill the sandbox plane answers 502 for it.
	if code, b := call("DELETE", "/sandboxes/"+a.SandboxID, map[string]string{"X-API-KEY": d.key}, nil); code != 204 {
		t.Fatalf("kill: %d %s", code, b)
	}
	if code, _ := call("DELETE", "/sandboxes/"+a.SandboxID, map[string]string{"X-API-KEY": d.key}, nil); code != 404 {
		t.Errorf("second kill: %d, want 404", code)
	}
	if code, b := call("GET", "/health", envd(a.SandboxID, map[string]string{"X-Access-Token": a.EnvdAccessToken}), nil); code != 502 {
		t.Errorf("envd of a killed sandbox: %d %s, want 502", code, b)
	}
}
