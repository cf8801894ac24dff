package e2e

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/client"
)

// TestResourceExhaustion: one sandbox runs out of memory, of pids, of its
// disk quota, and then one fills the host's whole (small) pool. Each time
// the hog gets a clear error, a neighbour sandbox and the API keep
// working, and /health says how full the pool is — degraded or unhealthy
// when nearly full, ok again once the space is freed.
func TestResourceExhaustion(t *testing.T) {
	// Serial: it runs a sandbox out of memory, pids and disk, load its neighbours would feel.
	// No default quota and no reserve: the test fills the pool on purpose.
	d := busyboxDaemon(t, "--image-size-gb", "1", "--default-disk-mb", "0", "--disk-reserve-mb", "0")
	c := d.client()
	ctx := ctxT(t, 5*time.Minute)
	create := func(l *client.Limits) string {
		t.Helper()
		sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", Limits: l})
		if err != nil {
			t.Fatal(err)
		}
		return sb.SandboxID
	}
	run := func(id, script string) client.ExecResult {
		t.Helper()
		res, err := c.Commands.ExecWait(ctx, id, client.ExecRequest{Command: script, User: "root", TimeoutMs: 60000})
		if err != nil {
			t.Fatalf("%s: %v", script, err)
		}
		return res
	}
	neighbour := create(nil)
	neighbourWorks := func(after string) {
		t.Helper()
		if res := run(neighbour, "echo ok > /workspace/n; cat /workspace/n"); res.Stdout != "ok\n" {
			t.Fatalf("after %s the neighbour: %+v", after, res)
		}
		if _, _, err := c.Sandboxes.List(ctx, client.ListOptions{}); err != nil {
			t.Fatalf("after %s the API: %v", after, err)
		}
	}
	hog := create(&client.Limits{MemoryMB: 64, Pids: 64, DiskMB: 64})

	// Memory: the process that asked is killed, the sandbox lives.
	if res := run(hog, `x=$(head -c 200000000 /dev/zero | tr "\0" a); echo ${#x}`); res.ExitCode != 137 {
		t.Errorf("allocating past 64 MiB: %+v, want exit 137 (killed)", res)
	}
	neighbourWorks("a memory-limit hit")

	// Pids: forks past the limit fail inside; the sandbox recovers.
	// (busybox sh gives up at the first fork that fails.)
	if res := run(hog, "i=0; while [ $i -lt 100 ]; do sleep 3 & i=$((i+1)); done 2>/tmp/forkerr"); res.ExitCode == 0 {
		t.Errorf("100 background processes under a limit of 64 all started: %+v", res)
	}
	time.Sleep(4 * time.Second) // the sleeps end
	if res := run(hog, "cat /tmp/forkerr; echo recovered"); !strings.Contains(res.Stdout, "fork") || !strings.Contains(res.Stdout, "recovered") {
		t.Errorf("after forking past 64 pids: %+v", res)
	}
	neighbourWorks("a pids-limit hit")

	// Its disk quota: the write fails with a clear error.
	res := run(hog, "dd if=/dev/zero of=/workspace/fill bs=1M count=200 2>&1; echo rc=$?")
	if !strings.Contains(res.Stdout, "quota exceeded") && !strings.Contains(res.Stdout, "No space left") {
		t.Errorf("writing past a 64 MiB quota: %+v", res)
	}
	neighbourWorks("a quota hit")
	if err := c.Sandboxes.Delete(ctx, hog); err != nil {
		t.Fatal(err)
	}

	// The host's pool: a sandbox without a quota fills it.
	filler := create(nil)
	run(filler, "dd if=/dev/urandom of=/workspace/fill bs=1M count=2000 >/dev/null 2>&1; sync; true")
	h, err := c.Meta.Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if h.Pool == nil || h.Pool.UsedPct < 85 || (h.Status != "degraded" && h.Status != "unhealthy") {
		t.Errorf("a full pool: health %+v pool %+v, want degraded or unhealthy", h.Status, h.Pool)
	}
	t.Logf("full pool: status %s, %.1f%% used", h.Status, h.Pool.UsedPct)
	// A write into the full pool fails inside, clearly; the API answers.
	if res := run(neighbour, "echo more > /workspace/more 2>&1 && dd if=/dev/zero of=/workspace/more2 bs=1M count=50 2>&1; echo rc=$?"); !strings.Contains(res.Stdout, "No space left") && !strings.Contains(res.Stdout, "quota") {
		t.Logf("a write in the neighbour with the pool full: %q", res.Stdout)
	}
	if _, _, err := c.Sandboxes.List(ctx, client.ListOptions{}); err != nil {
		t.Fatalf("the API with the pool full: %v", err)
	}
	// Freed again: the pool is back to ok.
	if err := c.Sandboxes.Delete(ctx, filler); err != nil {
		out, _ := exec.Command("btrfs", "filesystem", "usage", filepath.Join(d.dataDir, "pool")).CombinedOutput()
		t.Fatalf("deleting the sandbox that filled the pool: %v\n%s", err, out)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		h, err := c.Meta.Health(ctx)
		if err == nil && h.Status == "ok" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after freeing the pool: %+v, %v", h, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	neighbourWorks("the pool filled and freed")
}
