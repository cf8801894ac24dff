package e2e

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/client"
)

// TestLifecycleBadInput: negative and absurd timeouts, ports out of range
// in every port route, and lifecycle calls on a destroyed sandbox get a
// clear 4xx, never a 5xx or a silent success.
func TestLifecycleBadInput(t *testing.T) {
	t.Parallel()
	d := busyboxDaemon(t)
	c := d.client()
	ctx := ctxT(t, 2*time.Minute)

	// Timeouts at create: negative, above 24 h, and so large that seconds
	// → nanoseconds would overflow into a small number.
	for _, bad := range []int64{-1, 86401, 1 << 62} {
		if _, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", Timeout: &bad}); client.StatusCode(err) != 400 || !strings.Contains(err.Error(), "timeout") {
			t.Errorf("create with timeout %d: %v, want 400 naming the timeout", bad, err)
		}
	}
	sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb"})
	if err != nil {
		t.Fatal(err)
	}
	id := sb.SandboxID
	t.Cleanup(func() { _ = c.Sandboxes.Delete(ctxT(t, time.Minute), id) })
	for _, bad := range []int64{-5, 86401, 1 << 62} {
		if err := c.Lifecycle.SetTimeout(ctx, id, bad); client.StatusCode(err) != 400 || !strings.Contains(err.Error(), "timeout") {
			t.Errorf("POST /timeout %d: %v, want 400", bad, err)
		}
	}
	post := func(path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, "http://"+d.addr+path, bytes.NewBufferString(body))
		req.Header.Set("X-API-Key", d.key)
		req.Header.Set("Content-Type", "application/json")
		return do(t, req)
	}
	for _, body := range []string{`{"timeout": "soon"}`, `{"timeout": 1.5}`, `{}`} {
		if code, msg := post("/sandboxes/"+id+"/timeout", body); code != 400 {
			t.Errorf("POST /timeout %s: %d %s, want 400", body, code, msg)
		}
	}
	if code, msg := post("/sandboxes/"+id+"/resume", `{"timeout": -1}`); code != 400 {
		t.Errorf("resume with timeout -1: %d %s, want 400", code, msg)
	}
	// A fork's timeout goes through the same check (it once multiplied
	// first, so 2^62 s overflowed).
	for _, body := range []string{`{"timeout": -1}`, `{"timeout": 4611686018427387904}`} {
		if code, msg := post("/sandboxes/"+id+"/fork", body); code != 400 || !strings.Contains(msg, "timeout") {
			t.Errorf("fork %s: %d %s, want 400 naming the timeout", body, code, msg)
		}
	}

	// Ports out of range, in each route: the TCP tunnel, the headers and
	// the Host form.
	for _, port := range []string{"0", "70000", "-1", "http"} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+d.addr+"/sandboxes/"+id+"/ports/"+port+"/connect", nil)
		req.Header.Set("X-API-Key", d.key)
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "tcp")
		if code, msg := do(t, req); code != 400 {
			t.Errorf("ports/%s/connect: %d %s, want 400", port, code, msg)
		}
		req, _ = http.NewRequest(http.MethodGet, "http://"+d.addr+"/", nil)
		req.Header.Set("E2b-Sandbox-Id", id)
		req.Header.Set("E2b-Sandbox-Port", port)
		req.Header.Set("X-API-Key", d.key)
		if code, msg := do(t, req); code != 400 {
			t.Errorf("E2b-Sandbox-Port %s: %d %s, want 400", port, code, msg)
		}
	}
	for _, port := range []string{"0", "70000"} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+d.addr+"/", nil)
		req.Host = port + "-" + id + "." + sb.Domain
		req.Header.Set("X-API-Key", d.key)
		if code, msg := do(t, req); code != 400 || !strings.Contains(msg, "out of range") {
			t.Errorf("Host %s: %d %s, want 400 out of range", req.Host, code, msg)
		}
	}
	if _, errOut, code := d.cli("", "port-forward", id, "70000"); code == 0 || !strings.Contains(errOut, "70000") {
		t.Errorf("warren port-forward %s 70000: exit %d: %s", id, code, errOut)
	}

	// A destroyed sandbox: pause, resume, timeout and limits say it is gone.
	if err := c.Sandboxes.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := c.Lifecycle.Pause(ctx, id); client.StatusCode(err) != 404 {
		t.Errorf("pause of a destroyed sandbox: %v, want 404", err)
	}
	if _, err := c.Lifecycle.Resume(ctx, id); client.StatusCode(err) != 404 || !strings.Contains(err.Error(), id) {
		t.Errorf("resume of a destroyed sandbox: %v, want 404 naming it", err)
	}
	if err := c.Lifecycle.SetTimeout(ctx, id, 10); client.StatusCode(err) != 404 {
		t.Errorf("timeout of a destroyed sandbox: %v, want 404", err)
	}
	if _, err := c.Lifecycle.UpdateLimits(ctx, id, client.Limits{Pids: 100}); client.StatusCode(err) != 404 {
		t.Errorf("limits of a destroyed sandbox: %v, want 404", err)
	}
	if _, errOut, code := d.cli("", "sandbox", "resume", id); code == 0 || !strings.Contains(errOut, "not found") {
		t.Errorf("warren sandbox resume of a destroyed sandbox: exit %d: %s", code, errOut)
	}
}

// do sends req and returns the status and body.
func do(t *testing.T, req *http.Request) (int, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}
