package e2e

import (
	"bytes"
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/client"
)

// fairShareRun runs a shell command as root and returns its output.
func fairShareRun(t *testing.T, ctx context.Context, c *client.Client, id, script string) string {
	t.Helper()
	res, err := c.Commands.ExecWait(ctx, id, client.ExecRequest{Command: script, User: "root", TimeoutMs: 120000})
	if err != nil {
		t.Fatalf("%s in %s: %v", script, id, err)
	}
	return res.Stdout + res.Stderr
}

// fillScript writes until the disk refuses, and says how it was refused.
const fillScript = "dd if=/dev/zero of=/workspace/fill bs=1M count=4000 2>&1; sync; echo done"

// daemonWorks checks what issue 31 saw break once one sandbox filled the
// pool: a sandbox writes, a create, a snapshot, a fork, a delete and
// /health.
func daemonWorks(t *testing.T, ctx context.Context, c *client.Client, id, after string) {
	t.Helper()
	if out := fairShareRun(t, ctx, c, id, "head -c 4000000 /dev/zero > /workspace/small && echo wrote"); !strings.Contains(out, "wrote") {
		t.Errorf("after %s, a 4 MB write in a neighbour: %q", after, out)
	}
	sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb"})
	if err != nil {
		t.Fatalf("after %s, a create: %v", after, err)
	}
	if _, err := c.Snapshots.Create(ctx, id, client.NewSnapshot{}); err != nil {
		t.Errorf("after %s, a snapshot: %v", after, err)
	}
	forks, err := c.Snapshots.Fork(ctx, id, client.ForkRequest{})
	if err != nil || len(forks) != 1 || forks[0].Sandbox == nil {
		t.Fatalf("after %s, a fork: %+v %v", after, forks, err)
	}
	for _, del := range []string{sb.SandboxID, forks[0].Sandbox.SandboxID} {
		if err := c.Sandboxes.Delete(ctx, del); err != nil {
			t.Errorf("after %s, a delete: %v", after, err)
		}
	}
}

// TestFairShareDefaultQuota: with the defaults, every sandbox gets a
// quota of a tenth of the pool; one writing until EDQUOT leaves the
// others writing, the daemon creating, snapshotting and forking, and
// /health ok.
func TestFairShareDefaultQuota(t *testing.T) {
	t.Parallel()
	d := busyboxDaemon(t, "--image-size-gb", "1")
	c := d.client()
	ctx := ctxT(t, 5*time.Minute)
	hog, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb"})
	if err != nil {
		t.Fatal(err)
	}
	neighbour, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb"})
	if err != nil {
		t.Fatal(err)
	}
	det, err := c.Sandboxes.Get(ctx, hog.SandboxID)
	if err != nil || det.DiskSizeMB < 90 || det.DiskSizeMB > 103 {
		t.Fatalf("default quota in a 1 GiB pool: %d MiB (%v), want about a tenth", det.DiskSizeMB, err)
	}
	// As issue 31's hog did: a preallocation past the share, then writes.
	if out := fairShareRun(t, ctx, c, hog.SandboxID, "fallocate -l 2000M /workspace/big 2>&1; echo rc=$?"); !strings.Contains(out, "quota exceeded") {
		t.Errorf("fallocate past the default quota: %q, want EDQUOT", out)
	}
	if out := fairShareRun(t, ctx, c, hog.SandboxID, fillScript); !strings.Contains(out, "quota exceeded") {
		t.Fatalf("writing past the default quota: %q, want EDQUOT", out)
	}
	daemonWorks(t, ctx, c, neighbour.SandboxID, "one sandbox hit its default quota")
	h, err := c.Meta.Health(ctx)
	if err != nil || h.Status != "ok" {
		t.Errorf("health after one sandbox hit its quota: %+v %v, want ok", h, err)
	}
}

// TestFairShareReserve: sandboxes whose quotas add up to more than the
// pool all write until refused; the reserve stays free, and the daemon
// creates, snapshots, forks and deletes in it. Deleting a hog gives its
// room back to the others.
func TestFairShareReserve(t *testing.T) {
	t.Parallel()
	d := busyboxDaemon(t, "--image-size-gb", "1", "--default-disk-mb", "400", "--disk-reserve-mb", "200")
	c := d.client()
	ctx := ctxT(t, 5*time.Minute)
	var ids []string
	for range 3 {
		sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sb.SandboxID)
	}
	for _, id := range ids {
		// 3 × 400 MiB of quota in a 1 GiB pool: the last ones are
		// stopped by the cap on all sandboxes together, also EDQUOT.
		if out := fairShareRun(t, ctx, c, id, fillScript); !strings.Contains(out, "quota exceeded") {
			t.Fatalf("filling sandbox %s: %q, want EDQUOT", id, out)
		}
	}
	var st unix.Statfs_t
	if err := unix.Statfs(filepath.Join(d.dataDir, "pool"), &st); err != nil {
		t.Fatal(err)
	}
	free := int64(st.Bavail) * st.Bsize
	t.Logf("pool free with every sandbox full: %d MiB", free>>20)
	if free < 100<<20 {
		t.Errorf("the sandboxes filled the pool into its reserve: %d MiB free, want about 200", free>>20)
	}
	// The last one was stopped by the cap on all sandboxes, short of its
	// own quota.
	if det, err := c.Sandboxes.Get(ctx, ids[2]); err != nil || det.DiskUsedBytes >= 390<<20 {
		t.Errorf("the last sandbox holds %d bytes (%v): the cap on all sandboxes did not stop it", det.DiskUsedBytes, err)
	}
	if out := fairShareRun(t, ctx, c, ids[2], "head -c 4000000 /dev/zero > /workspace/more 2>&1; echo rc=$?"); !strings.Contains(out, "quota exceeded") {
		t.Errorf("a write with every sandbox's share used: %q, want EDQUOT", out)
	}
	// The daemon's own work still has room: a create, a snapshot, a fork.
	sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb"})
	if err != nil {
		t.Fatalf("create with the sandboxes' share used: %v", err)
	}
	if _, err := c.Snapshots.Create(ctx, ids[0], client.NewSnapshot{}); err != nil {
		t.Errorf("snapshot with the sandboxes' share used: %v", err)
	}
	if forks, err := c.Snapshots.Fork(ctx, ids[0], client.ForkRequest{}); err != nil || len(forks) != 1 || forks[0].Sandbox == nil {
		t.Errorf("fork with the sandboxes' share used: %+v %v", forks, err)
	}
	if _, err := c.Meta.Health(ctx); err != nil {
		t.Errorf("health: %v", err)
	}
	// Deleting a full sandbox (one without snapshots, which would keep its
	// data) frees a share for the others (the cap does not move).
	for _, id := range []string{ids[1], sb.SandboxID} {
		if err := c.Sandboxes.Delete(ctx, id); err != nil {
			t.Fatalf("delete with the sandboxes' share used: %v", err)
		}
	}
	waitFor(t, time.Minute, "a deleted sandbox's room to come back", func() bool {
		out := fairShareRun(t, ctx, c, ids[2], "rm -f /workspace/more; head -c 4000000 /dev/zero > /workspace/more 2>&1 && echo wrote")
		return strings.Contains(out, "wrote")
	})
}

// TestTeamLimits: a team at its limit gets 429 naming the limit while
// another team creates; usage is the team's own; bad input is 400 and
// leaves the limits as they were.
func TestTeamLimits(t *testing.T) {
	t.Parallel()
	d := busyboxDaemon(t)
	admin := d.client()
	ctx := ctxT(t, 3*time.Minute)
	keyOf := func(team string) *client.Client {
		k, err := admin.APIKeys.Create(ctx, client.NewAPIKey{Team: team})
		if err != nil {
			t.Fatal(err)
		}
		return client.New("http://"+d.addr, k.Key)
	}
	small, other := keyOf("small"), keyOf("other")
	if out := d.mustCLI("team", "limits", "small", "--sandboxes", "1", "--memory-mb", "2048", "--disk-mb", "4096"); !strings.Contains(out, "small") {
		t.Fatalf("team limits: %q", out)
	}
	a, err := small.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = small.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb"})
	if client.StatusCode(err) != 429 || !strings.Contains(err.Error(), "limit of 1 sandboxes alive") {
		t.Fatalf("a create past the team's limit: %v, want 429 naming the limit", err)
	}
	forks, err := small.Snapshots.Fork(ctx, a.SandboxID, client.ForkRequest{})
	if err != nil || len(forks) != 1 || forks[0].Error == nil || forks[0].Error.Code != 429 {
		t.Fatalf("a fork past the team's limit: %+v %v, want its 429", forks, err)
	}
	if _, err := other.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb"}); err != nil {
		t.Fatalf("another team's create while one is at its limit: %v", err)
	}
	u, err := small.Teams.Usage(ctx, "small")
	if err != nil || u.Sandboxes != 1 || u.Limits.Sandboxes != 1 || u.DiskMB == 0 || u.Limits.MemoryMB != 2048 {
		t.Fatalf("usage: %+v %v", u, err)
	}
	if out := d.mustCLI("team", "usage", "small"); !strings.Contains(out, "used") || !strings.Contains(out, "limit") {
		t.Errorf("team usage: %q", out)
	}
	if _, err := small.Teams.Usage(ctx, "other"); client.StatusCode(err) != 403 {
		t.Errorf("a team reading another's usage: %v, want 403", err)
	}
	if _, err := small.Teams.SetLimits(ctx, "small", client.TeamLimits{Sandboxes: 100}); client.StatusCode(err) != 403 {
		t.Errorf("a team setting its own limits: %v, want 403", err)
	}
	// A limit change that passes the team's memory is refused too.
	if _, err := small.Lifecycle.UpdateLimits(ctx, a.SandboxID, client.Limits{MemoryMB: 4096}); client.StatusCode(err) != 429 || !strings.Contains(err.Error(), "memory") {
		t.Errorf("a limit change past the team's memory: %v, want 429", err)
	}

	// Bad input: 400, and the limits stay.
	put := func(team, body string) int {
		req, _ := http.NewRequest(http.MethodPut, "http://"+d.addr+"/teams/"+team+"/limits", bytes.NewBufferString(body))
		req.Header.Set("X-API-Key", d.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct{ team, body string }{
		{"small", `{"sandboxes": -1}`},
		{"small", `{"memoryMB": -5}`},
		{"small", `{"cpuCount": -0.5}`},
		{"small", `{"diskMB": 1e30}`},
		{"small", `{"sandboxes": "two"}`},
		{"small", `{"team": "other", "sandboxes": 3}`},
		{"Bad.Team", `{"sandboxes": 3}`},
		{"-lead", `{"sandboxes": 3}`},
		{"small", `{"sandboxes": 1, "memory": 512}`}, // a wrong name: refused, not ignored
		{"small", ``},
	} {
		if code := put(c.team, c.body); code != 400 {
			t.Errorf("PUT /teams/%s/limits %s: %d, want 400", c.team, c.body, code)
		}
	}
	if u, err := admin.Teams.Usage(ctx, "small"); err != nil || u.Limits.Sandboxes != 1 || u.Limits.DiskMB != 4096 {
		t.Errorf("limits after refused changes: %+v %v", u.Limits, err)
	}
	if _, _, code := d.cli("", "team", "limits", "small", "--sandboxes", "-3"); code == 0 {
		t.Errorf("warren team limits --sandboxes -3 succeeded")
	}
	if _, err := admin.Teams.Usage(ctx, "UPPER"); client.StatusCode(err) != 400 {
		t.Errorf("usage of a bad team name: %v, want 400", err)
	}
	// Raised: the team creates again.
	if _, err := admin.Teams.SetLimits(ctx, "small", client.TeamLimits{Sandboxes: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := small.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb"}); err != nil {
		t.Errorf("a create after the limit was raised: %v", err)
	}
}
