package envdfs

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/agent/internal/agenttest"
	"github.com/warrenhq/warren/agent/internal/users"
	fspb "github.com/warrenhq/warren/api/gen/filesystem"
	"github.com/warrenhq/warren/api/gen/filesystem/filesystemconnect"
)

const (
	userUID   = 1000
	nobodyUID = 65534
)

// env is one service over a loopback HTTP/2 server, as the daemon reaches
// it, with a fake sandbox: "user" (uid 1000) whose home is a temp directory,
// root, and nobody.
type env struct {
	svc      *Service
	base     string // temp root of the fake sandbox
	home     string // user's home
	rootHome string
	hc       *http.Client
	url      string
	fs       filesystemconnect.FilesystemClient
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvWith(t, Config{})
}

func newEnvWith(t *testing.T, cfg Config) *env {
	t.Helper()
	agenttest.RequireRoot(t) // files are given to other users, as the agent (PID 1, root) does
	base := t.TempDir()
	e := &env{base: base, home: filepath.Join(base, "home", "user"), rootHome: filepath.Join(base, "root")}
	for _, d := range []string{e.home, e.rootHome} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(e.home, userUID, userUID); err != nil {
		t.Fatal(err)
	}
	db := users.DB{PasswdPath: filepath.Join(base, "passwd"), GroupPath: filepath.Join(base, "group")}
	passwd := fmt.Sprintf("root:x:0:0:root:%s:/bin/sh\nuser:x:1000:1000::%s:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n", e.rootHome, e.home)
	group := "root:x:0:\nuser:x:1000:\nnogroup:x:65534:\n"
	if err := os.WriteFile(db.PasswdPath, []byte(passwd), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(db.GroupPath, []byte(group), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg.Users = db
	e.svc = New(cfg)
	mux := http.NewServeMux()
	e.svc.Handle(mux, connect.WithCompression("gzip", nil, nil))
	e.hc, e.url = agenttest.Serve(t, mux)
	e.fs = filesystemconnect.NewFilesystemClient(e.hc, e.url, connect.WithProtoJSON())
	t.Cleanup(func() {
		e.svc.mu.Lock()
		ids := make([]string, 0, len(e.svc.watchers))
		for id := range e.svc.watchers {
			ids = append(ids, id)
		}
		e.svc.mu.Unlock()
		for _, id := range ids {
			e.svc.dropWatcher(id)
		}
	})
	return e
}

// req builds a Connect request acting as user ("" = the default user).
func req[T any](msg *T, user string) *connect.Request[T] {
	r := connect.NewRequest(msg)
	if user != "" {
		r.Header().Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(user+":")))
	}
	return r
}

func wantCode(t *testing.T, what string, err error, code connect.Code) {
	t.Helper()
	if connect.CodeOf(err) != code {
		t.Fatalf("%s: want %v, got %v", what, code, err)
	}
}

// owner returns a path's uid and gid.
func owner(t *testing.T, p string) (uint32, uint32) {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return st.Uid, st.Gid
}

func wantOwner(t *testing.T, p string, uid uint32) {
	t.Helper()
	if u, g := owner(t, p); u != uid || g != uid {
		t.Fatalf("%s is owned by %d:%d, want %d:%d", p, u, g, uid, uid)
	}
}

func writeFixture(t *testing.T, p, content string, uid int) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p, uid, uid); err != nil {
		t.Fatal(err)
	}
}

// httpDo sends a plain-HTTP request and returns the answer and its body.
func (e *env) httpDo(t *testing.T, method, query string, hdr http.Header, body io.Reader) (*http.Response, []byte) {
	t.Helper()
	r, err := http.NewRequest(method, e.url+"/files?"+query, body)
	if err != nil {
		t.Fatal(err)
	}
	// Go's transport would otherwise ask for gzip itself and hide the raw
	// answer (Content-Encoding, Content-Length) from the test.
	r.Header.Set("Accept-Encoding", "identity")
	for k, v := range hdr {
		r.Header[k] = v
	}
	resp, err := e.hc.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// multipartBody makes a form with one `file` part per name (content: the
// name's own text unless given).
func multipartBody(t *testing.T, files ...[2]string) (string, []byte) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for _, f := range files {
		pw, err := mw.CreateFormFile("file", f[0])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pw.Write([]byte(f[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	return mw.FormDataContentType(), buf.Bytes()
}

type uploaded = []uploadEntry

// upload posts files as multipart and decodes a 200 answer.
func (e *env) upload(t *testing.T, query string, hdr http.Header, files ...[2]string) uploaded {
	t.Helper()
	ct, body := multipartBody(t, files...)
	if hdr == nil {
		hdr = http.Header{}
	}
	hdr.Set("Content-Type", ct)
	resp, b := e.httpDo(t, http.MethodPost, query, hdr, bytes.NewReader(body))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("upload: %d %s", resp.StatusCode, b)
	}
	var out uploaded
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("upload answer %s: %v", b, err)
	}
	return out
}

// wantHTTPError checks envd's JSON error answer.
func wantHTTPError(t *testing.T, what string, resp *http.Response, body []byte, status int) {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("%s: status %d (%s), want %d", what, resp.StatusCode, body, status)
	}
	var e struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Code != status || e.Message == "" {
		t.Fatalf("%s: error body %s (%v)", what, body, err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s: error Content-Type %q", what, ct)
	}
}

func q(kv ...string) string {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return v.Encode()
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func names(es []*fspb.EntryInfo) string {
	var n []string
	for _, e := range es {
		n = append(n, e.Name)
	}
	return strings.Join(n, ",")
}
