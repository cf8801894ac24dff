package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/client"
)

// TestAutoPauseResume: a sandbox created with autoPause is paused, not
// killed, at its run timeout; with autoResume the next exec resumes it, with
// its files and processes' state intact.
func TestAutoPauseResume(t *testing.T) {
	t.Parallel()
	d := busyboxDaemon(t)
	c := d.client()
	ctx := ctxT(t, 2*time.Minute)
	timeout := int64(2)
	sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", Timeout: &timeout,
		AutoPause: true, AutoResume: &client.AutoResume{Enabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Commands.ExecWait(ctx, sb.SandboxID, client.ExecRequest{Command: "echo kept > /workspace/f"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		det, err := c.Sandboxes.Get(ctx, sb.SandboxID)
		if err != nil {
			t.Fatalf("a sandbox with autoPause was killed at its timeout: %v", err)
		}
		if det.State == "paused" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not paused at its timeout: %s", det.State)
		}
		time.Sleep(200 * time.Millisecond)
	}
	res, err := c.Commands.ExecWait(ctx, sb.SandboxID, client.ExecRequest{Cmd: []string{"cat", "/workspace/f"}})
	if err != nil || res.Stdout != "kept\n" {
		t.Fatalf("exec on an autoResume sandbox: %+v %v", res, err)
	}
	det, err := c.Sandboxes.Get(ctx, sb.SandboxID)
	if err != nil || det.State != "running" || det.EndAt == nil || !det.EndAt.After(time.Now()) {
		t.Fatalf("after auto-resume: %+v %v", det, err)
	}
	evs, _ := c.Sandboxes.Events(ctx, sb.SandboxID, 0)
	var kinds []string
	for _, e := range evs {
		kinds = append(kinds, e.Kind+"/"+e.Cause)
	}
	if got := strings.Join(kinds, " "); !strings.Contains(got, "paused/timeout") || !strings.Contains(got, "resumed/auto-resume") {
		t.Fatalf("events: %s", got)
	}
	if err := c.Sandboxes.Delete(ctx, sb.SandboxID); err != nil {
		t.Fatal(err)
	}
}
