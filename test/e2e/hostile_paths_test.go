package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/client"
)

// TestHostilePathsEverywhere throws hostile paths — the host's own files
// by absolute path, `..` runs, /proc/1/root, NUL bytes, giant names, deep
// trees — at every parameter of the API that names a path: warren's file
// API (read, write, delete, stat, list, mkdir, move both ends), exec and
// process cwd, every agent tool, E2B's /files (query and multipart names)
// and its filesystem service. Each is refused (4xx) or resolved inside the
// sandbox: never a server error, never the host's file read, written,
// moved or removed.
func TestHostilePathsEverywhere(t *testing.T) {
	t.Parallel()
	d, ctx, id := busyboxSandbox(t, 4*time.Minute)
	c := d.client()
	sb, err := c.Sandboxes.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	// The host's secret, and a host directory an escaped write would land in.
	const secret = "HOST-SECRET-7c2e"
	hostDir, secretFile := hostSecret(t, secret)
	if _, err := c.Commands.ExecWait(ctx, id, client.ExecRequest{Command: "mkdir -p /workspace && ln -s " + hostDir + " /workspace/hostlink", User: "root"}); err != nil {
		t.Fatal(err)
	}
	hostile := []string{
		secretFile, "/../../.." + secretFile, "../../../../" + secretFile, "/proc/1/root" + secretFile,
		"/workspace/hostlink/secret.txt", "/proc/self/root" + secretFile, "/workspace/../../..", "..",
		"/a\x00b", "/" + strings.Repeat("n", 300), "/" + strings.Repeat("deep/", 900) + "x",
		filepath.Join(hostDir, "pwned"), "/proc/1/root" + filepath.Join(hostDir, "pwned"), "/workspace/hostlink/pwned",
		"/proc/sys/kernel/hostname", "/dev/../proc/1/root" + secretFile,
	}

	statuses := map[int]int{}
	// raw sends one request and checks its answer; any status below 500 is
	// fine, a server error or the host's secret is not.
	raw := func(what, method, target string, hdr map[string]string, body io.Reader) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, "http://"+d.addr+target, body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-API-Key", d.key)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		statuses[resp.StatusCode]++
		if resp.StatusCode >= 500 {
			t.Errorf("%s: %d %.200s", what, resp.StatusCode, b)
		}
		if bytes.Contains(b, []byte(secret)) {
			t.Errorf("%s returned the host's secret", what)
		}
	}
	jsonBody := func(v any) io.Reader {
		b, _ := json.Marshal(v)
		return bytes.NewReader(b)
	}
	sbx := "/sandboxes/" + id
	envd := map[string]string{"E2b-Sandbox-Id": id, "E2b-Sandbox-Port": "49983", "X-Access-Token": sb.EnvdAccessToken}
	envdRPC := func(method string, msg any) {
		h := map[string]string{"Content-Type": "application/json", "Connect-Protocol-Version": "1"}
		for k, v := range envd {
			h[k] = v
		}
		raw(fmt.Sprintf("envd %s %.60q", method, msg), "POST", "/filesystem.Filesystem/"+method, h, jsonBody(msg))
	}
	for _, p := range hostile {
		q := "?" + url.Values{"path": {p}}.Encode()
		name := fmt.Sprintf("%.60q", p)
		raw("GET files "+name, "GET", sbx+"/files"+q, nil, nil)
		raw("PUT files "+name, "PUT", sbx+"/files"+q, nil, strings.NewReader("pwned"))
		raw("DELETE files "+name, "DELETE", sbx+"/files"+q, nil, nil)
		raw("stat "+name, "GET", sbx+"/files/stat"+q, nil, nil)
		raw("list "+name, "GET", sbx+"/files/list"+q+"&depth=3", nil, nil)
		raw("mkdir "+name, "POST", sbx+"/files/mkdir"+q, nil, nil)
		raw("move from "+name, "POST", sbx+"/files/move", nil, jsonBody(map[string]string{"source": p, "destination": "/workspace/moved"}))
		raw("move to "+name, "POST", sbx+"/files/move", nil, jsonBody(map[string]string{"source": "/workspace/nothing", "destination": p}))
		raw("exec cwd "+name, "POST", sbx+"/exec?wait=true", nil, jsonBody(map[string]any{"command": "cat secret.txt; pwd", "cwd": p}))
		raw("process cwd "+name, "POST", sbx+"/processes", nil, jsonBody(map[string]any{"command": "cat secret.txt", "cwd": p}))
		for tool, params := range map[string]map[string]any{
			"read":  {"path": p},
			"write": {"path": p, "content": "pwned"},
			"edit":  {"path": p, "oldString": "HOST", "newString": "pwned"},
			"ls":    {"path": p, "depth": 3},
			"glob":  {"pattern": "**/secret*", "path": p},
			"grep":  {"pattern": "SECRET", "path": p},
			"bash":  {"command": "cat secret.txt", "cwd": p},
		} {
			raw("tool "+tool+" "+name, "POST", sbx+"/tools/"+tool, nil, jsonBody(map[string]any{"params": params}))
		}
		// E2B's sandbox plane: /files by query and by multipart name, and
		// the filesystem service.
		raw("envd GET /files "+name, "GET", "/files"+q+"&username=root", envd, nil)
		var mp bytes.Buffer
		w := multipart.NewWriter(&mp)
		part, _ := w.CreateFormFile("file", p)
		part.Write([]byte("pwned"))
		w.Close()
		raw("envd POST /files "+name, "POST", "/files?username=root", map[string]string{"E2b-Sandbox-Id": id, "E2b-Sandbox-Port": "49983",
			"X-Access-Token": sb.EnvdAccessToken, "Content-Type": w.FormDataContentType()}, &mp)
		envdRPC("Stat", map[string]string{"path": p})
		envdRPC("ListDir", map[string]any{"path": p, "depth": 3})
		envdRPC("MakeDir", map[string]string{"path": p})
		envdRPC("Move", map[string]string{"source": p, "destination": "/workspace/moved2"})
		envdRPC("Remove", map[string]string{"path": p})
	}
	t.Logf("answers by status: %v", statuses)
	// The host is untouched: the secret is where it was, unchanged, and
	// nothing was written beside it.
	if b, err := os.ReadFile(secretFile); err != nil || string(b) != secret+"\n" {
		t.Errorf("the host's secret after the attack: %q %v", b, err)
	}
	if names := dirNames(hostDir); len(names) != 1 {
		t.Errorf("the host directory holds %v after the attack, want only secret.txt", names)
	}
	// A file whose size stat does not know (procfs says 0) is read whole.
	if rc, err := c.Files.Read(ctx, id, "/proc/self/status"); err != nil {
		t.Errorf("read /proc/self/status: %v", err)
	} else {
		status, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !strings.Contains(string(status), "Name:") {
			t.Errorf("read /proc/self/status: %v: %.200q", err, status)
		}
	}
	// And the sandbox still works.
	if res, err := c.Commands.ExecWait(ctx, id, sh("echo alive")); err != nil || res.Stdout != "alive\n" {
		t.Errorf("the sandbox after the attack: %+v %v", res, err)
	}
}
