package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/client"
)

// TestNoTimeoutRefused: a daemon started with --allow-no-timeout=false
// answers 400 naming the flag to a run timeout of 0 wherever one can be
// given (warren's and E2B's create, /timeout, /resume and /connect, fork,
// the CLI), changes nothing when it refuses, and takes nonzero timeouts.
func TestNoTimeoutRefused(t *testing.T) {
	t.Parallel()
	d := busyboxDaemon(t, "--allow-no-timeout=false")
	ctx := ctxT(t, 2*time.Minute)
	c := d.client()
	refused := func(what string, code int, body string) {
		t.Helper()
		if code != 400 || !strings.Contains(body, "--allow-no-timeout") {
			t.Errorf("%s with timeout 0: %d %s, want 400 naming --allow-no-timeout", what, code, body)
		}
	}

	for _, path := range []string{"/sandboxes", "/v2/sandboxes"} {
		code, body := d.postAPI(ctx, path, `{"templateID": "bb", "timeout": 0}`)
		refused("POST "+path, code, body)
	}
	if list, _, err := c.Sandboxes.List(ctx, client.ListOptions{}); err != nil || len(list) != 0 {
		t.Fatalf("refused creates left sandboxes: %+v %v", list, err)
	}
	_, errOut, code := d.cli("", "sandbox", "create", "--template", "bb", "--timeout", "0")
	if code == 0 || !strings.Contains(errOut, "--allow-no-timeout") {
		t.Errorf("warren sandbox create --timeout 0: exit %d, stderr %q; want a failure naming the flag", code, errOut)
	}

	code, body := d.postAPI(ctx, "/sandboxes", `{"templateID": "bb", "timeout": 60}`)
	if code != 201 {
		t.Fatalf("create with timeout 60: %d %s", code, body)
	}
	var sb client.Sandbox
	if err := json.Unmarshal([]byte(body), &sb); err != nil || sb.SandboxID == "" {
		t.Fatalf("create answer %s: %v", body, err)
	}
	id := sb.SandboxID
	before, err := c.Sandboxes.Get(ctx, id)
	if err != nil || before.EndAt == nil {
		t.Fatalf("the sandbox has no end: %+v %v", before, err)
	}

	code, body = d.postAPI(ctx, "/sandboxes/"+id+"/timeout", `{"timeout": 0}`)
	refused("POST /timeout", code, body)
	code, body = d.postAPI(ctx, "/sandboxes/"+id+"/fork", `{"timeout": 0}`)
	refused("POST /fork", code, body)
	if err := c.Lifecycle.Pause(ctx, id); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/resume", "/connect"} {
		code, body = d.postAPI(ctx, "/sandboxes/"+id+path, `{"timeout": 0}`)
		refused("POST "+path, code, body)
	}
	after, err := c.Sandboxes.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if after.State != "paused" || after.EndAt == nil || !after.EndAt.Equal(*before.EndAt) {
		t.Fatalf("refused calls changed the sandbox: state %s, end %v (was %v)", after.State, after.EndAt, before.EndAt)
	}
	if list, _, _ := c.Sandboxes.List(ctx, client.ListOptions{}); len(list) != 1 {
		t.Fatalf("a refused fork made sandboxes: %d listed", len(list))
	}

	// Nonzero timeouts still work everywhere.
	if code, body = d.postAPI(ctx, "/sandboxes/"+id+"/connect", `{"timeout": 120}`); code != 201 {
		t.Fatalf("connect with timeout 120: %d %s", code, body)
	}
	if code, body = d.postAPI(ctx, "/sandboxes/"+id+"/timeout", `{"timeout": 90}`); code != 204 {
		t.Fatalf("POST /timeout 90: %d %s", code, body)
	}
	if code, body = d.postAPI(ctx, "/sandboxes/"+id+"/fork", `{"timeout": 30}`); code != 201 || !strings.Contains(body, `"sandboxID"`) {
		t.Fatalf("fork with timeout 30: %d %s", code, body)
	}
	if code, body = d.postAPI(ctx, "/v2/sandboxes", `{"templateID": "bb"}`); code != 201 {
		t.Fatalf("create with the default timeout: %d %s", code, body)
	}
}
