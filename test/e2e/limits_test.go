package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/client"
)

// TestUpdateLimits changes a running sandbox's memory and pids limits in
// place and reads them from inside; bad values are refused.
func TestUpdateLimits(t *testing.T) {
	d := newDaemon(t)
	d.start()
	d.mustCLI("template", "build", "bb", "--busybox", "--data-dir", d.dataDir)
	c := d.client()
	ctx := ctxT(t, time.Minute)
	sb, err := c.CreateSandbox(ctx, client.NewSandbox{TemplateID: "bb", Limits: &client.Limits{MemoryMB: 64, Pids: 100}})
	if err != nil {
		t.Fatal(err)
	}
	read := func() string {
		res, err := c.ExecWait(ctx, sb.SandboxID, client.ExecRequest{Command: "cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/memory.max /sys/fs/cgroup/pids/pids.max /sys/fs/cgroup/pids.max 2>/dev/null; true"})
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(strings.Fields(res.Stdout), " ")
	}
	if got := read(); got != "67108864 100" {
		t.Fatalf("limits before: %q", got)
	}
	out := d.mustCLI("sandbox", "limits", sb.SandboxID, "--memory-mb", "128", "--pids", "200")
	if !strings.Contains(out, "128MiB") {
		t.Fatalf("sandbox limits: %q", out)
	}
	if got := read(); got != "134217728 200" {
		t.Fatalf("limits after: %q", got)
	}
	det, _ := c.GetSandbox(ctx, sb.SandboxID)
	if det.MemoryMB != 128 || det.Pids != 200 {
		t.Fatalf("recorded limits: %+v", det)
	}
	if _, err := c.UpdateLimits(ctx, sb.SandboxID, client.Limits{Pids: 3}); client.StatusCode(err) != 400 {
		t.Fatalf("pids 3: %v", err)
	}
	if _, err := c.UpdateLimits(ctx, sb.SandboxID, client.Limits{}); client.StatusCode(err) != 400 {
		t.Fatalf("no limits: %v", err)
	}
	if _, err := c.UpdateLimits(ctx, "nosuchsandbox", client.Limits{Pids: 50}); client.StatusCode(err) != 404 {
		t.Fatalf("unknown sandbox: %v", err)
	}
	if err := c.DeleteSandbox(ctx, sb.SandboxID); err != nil {
		t.Fatal(err)
	}
}
