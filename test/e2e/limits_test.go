package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/client"
)

// TestUpdateLimits changes a running sandbox's memory and pids limits in
// place and reads them from inside; bad values are refused.
func TestUpdateLimits(t *testing.T) {
	t.Parallel()
	d := busyboxDaemon(t)
	c := d.client()
	ctx := ctxT(t, time.Minute)
	sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", Limits: &client.Limits{MemoryMB: 64, Pids: 100}})
	if err != nil {
		t.Fatal(err)
	}
	read := func() string {
		res, err := c.Commands.ExecWait(ctx, sb.SandboxID, client.ExecRequest{Command: "cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/memory.max /sys/fs/cgroup/pids/pids.max /sys/fs/cgroup/pids.max 2>/dev/null; true"})
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
	det, _ := c.Sandboxes.Get(ctx, sb.SandboxID)
	if det.MemoryMB != 128 || det.Pids != 200 {
		t.Fatalf("recorded limits: %+v", det)
	}
	if _, err := c.Lifecycle.UpdateLimits(ctx, sb.SandboxID, client.Limits{Pids: 3}); client.StatusCode(err) != 400 {
		t.Fatalf("pids 3: %v", err)
	}
	if _, err := c.Lifecycle.UpdateLimits(ctx, sb.SandboxID, client.Limits{}); client.StatusCode(err) != 400 {
		t.Fatalf("no limits: %v", err)
	}
	if _, err := c.Lifecycle.UpdateLimits(ctx, "nosuchsandbox", client.Limits{Pids: 50}); client.StatusCode(err) != 404 {
		t.Fatalf("unknown sandbox: %v", err)
	}
	if err := c.Sandboxes.Delete(ctx, sb.SandboxID); err != nil {
		t.Fatal(err)
	}
}

// TestUpdateDiskQuota: a running sandbox's disk quota changes in place. A
// write past the old quota succeeds once it is raised; once lowered (not
// below what the sandbox holds, which is refused) writes fail with EDQUOT
// inside.
func TestUpdateDiskQuota(t *testing.T) {
	t.Parallel()
	d := busyboxDaemon(t)
	c := d.client()
	ctx := ctxT(t, 2*time.Minute)
	sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", Limits: &client.Limits{DiskMB: 40}})
	if err != nil {
		t.Fatal(err)
	}
	id := sb.SandboxID
	t.Cleanup(func() { _ = c.Sandboxes.Delete(ctxT(t, time.Minute), id) })
	write := func(name string, mb int) string {
		t.Helper()
		res, err := c.Commands.ExecWait(ctx, id, client.ExecRequest{Command: fmt.Sprintf("dd if=/dev/zero of=/tmp/%s bs=1M count=%d 2>&1 && sync; echo rc=$?", name, mb)})
		if err != nil {
			t.Fatal(err)
		}
		return res.Stdout
	}
	if out := write("a", 30); !strings.Contains(out, "rc=0") {
		t.Fatalf("30 MB under a 40 MB quota: %s", out)
	}
	// 30 more would not fit in 40 MB; they do in 100.
	out := d.mustCLI("sandbox", "limits", id, "--disk-mb", "100")
	if !strings.Contains(out, "disk 100MiB") {
		t.Fatalf("sandbox limits --disk-mb 100: %q", out)
	}
	if out := write("b", 30); !strings.Contains(out, "rc=0") {
		t.Fatalf("30 MB more after raising the quota to 100 MB: %s", out)
	}
	det, err := c.Sandboxes.Get(ctx, id)
	if err != nil || det.DiskSizeMB != 100 || det.DiskUsedBytes < 60<<20 {
		t.Fatalf("after raising: %+v %v", det, err)
	}
	// Below what it holds: refused, the quota stays.
	if _, err := c.Lifecycle.UpdateLimits(ctx, id, client.Limits{DiskMB: 20}); client.StatusCode(err) != 409 || !strings.Contains(err.Error(), "holds") {
		t.Fatalf("a quota below the sandbox's use: %v, want 409", err)
	}
	// Lowered to 10 MB above its use: a 30 MB write fails inside.
	lower := det.DiskUsedBytes>>20 + 10
	if got, err := c.Lifecycle.UpdateLimits(ctx, id, client.Limits{DiskMB: lower}); err != nil {
		t.Fatalf("lower the quota to %d MB: %v", lower, err)
	} else if got.DiskSizeMB != lower || got.DiskUsedBytes < 60<<20 {
		t.Errorf("the answer to a quota change: size %d MB, used %d bytes; want %d MB and the use", got.DiskSizeMB, got.DiskUsedBytes, lower)
	}
	if out := write("c", 30); !strings.Contains(out, "Disk quota exceeded") {
		t.Fatalf("30 MB more under a quota lowered to %d MB: %s", lower, out)
	}
	if det, err := c.Sandboxes.Get(ctx, id); err != nil || det.DiskSizeMB != lower {
		t.Fatalf("after lowering: %+v %v", det, err)
	}
	if _, err := c.Lifecycle.UpdateLimits(ctx, id, client.Limits{DiskMB: 1 << 40}); err == nil || !strings.Contains(err.Error(), "diskMB") {
		t.Errorf("a quota out of range: %v, want the message to name diskMB", err)
	}
	for _, bad := range []int64{-1, 1, 1 << 40} {
		if _, err := c.Lifecycle.UpdateLimits(ctx, id, client.Limits{DiskMB: bad}); client.StatusCode(err) != 400 {
			t.Errorf("diskMB %d: %v, want 400", bad, err)
		}
	}
}
