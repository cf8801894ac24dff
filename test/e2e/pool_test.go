package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/client"
)

// TestWarmPool runs a daemon with a pool of 3 ready sandboxes: 3 creates
// are served from it, it refills, and a create with its own env vars,
// limits and disk quota is served from it too, with all three applied.
func TestWarmPool(t *testing.T) {
	t.Parallel()
	d := busyboxDaemon(t, "--pool", "bb=3")
	c := d.client()
	ctx := ctxT(t, 2*time.Minute)
	waitReady := func(want int) client.Pool {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			pools, err := c.Pools.List(ctx)
			if err != nil || len(pools) != 1 {
				t.Fatalf("pools: %v %v", pools, err)
			}
			if pools[0].Ready == want {
				return pools[0]
			}
			if time.Now().After(deadline) {
				t.Fatalf("pool never reached %d ready: %+v", want, pools[0])
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	waitReady(3)
	var ids []string
	for i := 0; i < 3; i++ {
		start := time.Now()
		sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", Metadata: map[string]string{"n": "x"}})
		if err != nil {
			t.Fatal(err)
		}
		created := time.Since(start)
		res, err := c.Commands.ExecWait(ctx, sb.SandboxID, client.ExecRequest{Cmd: []string{"echo", "warm"}})
		if err != nil || res.Stdout != "warm\n" {
			t.Fatalf("exec in a claimed sandbox: %+v %v", res, err)
		}
		t.Logf("claim %d: create %v, → first output %v", i, created, time.Since(start))
		ids = append(ids, sb.SandboxID)
	}
	p, _ := c.Pools.List(ctx)
	if p[0].Hits != 3 {
		t.Fatalf("pool hits %d, want 3: %+v", p[0].Hits, p[0])
	}
	waitReady(3) // refilled
	// /metrics shows the pool's size, hits and misses (hit ratio).
	prom := httpGet(t, d, "/metrics", d.key, 200)
	for _, want := range []string{
		`warren_warm_pool_ready{network="false",runtime="",template="bb"} 3`,
		`warren_warm_pool_min{network="false",runtime="",template="bb"} 3`,
		`warren_warm_pool_hits_total{network="false",runtime="",template="bb"} 3`,
		`warren_warm_pool_misses_total{network="false",runtime="",template="bb"} 0`,
		`warren_warm_pool_hit_ratio{network="false",runtime="",template="bb"} 1`,
	} {
		if !strings.Contains(prom, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, prom)
		}
	}
	// A claimed sandbox is the team's: listed, with its metadata.
	det, err := c.Sandboxes.Get(ctx, ids[0])
	if err != nil || det.Metadata["n"] != "x" || det.TemplateID != "bb" {
		t.Fatalf("claimed sandbox: %+v %v", det, err)
	}
	// A create with its own env vars, limits and disk quota is served from
	// the pool too: the claim applies them.
	sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", EnvVars: map[string]string{"K": "v"},
		Limits: &client.Limits{MemoryMB: 96, Pids: 150, DiskMB: 40}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Commands.ExecWait(ctx, sb.SandboxID, client.ExecRequest{Command: "echo $K; cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/memory.max /sys/fs/cgroup/pids/pids.max /sys/fs/cgroup/pids.max 2>/dev/null; true"})
	if got := strings.Join(strings.Fields(res.Stdout), " "); err != nil || got != "v 100663296 150" {
		t.Fatalf("claimed with env and limits: %q %v", got, err)
	}
	// The quota holds: 30 MB fit, 30 more do not.
	res, err = c.Commands.ExecWait(ctx, sb.SandboxID, client.ExecRequest{Command: "dd if=/dev/zero of=/tmp/a bs=1M count=30 2>&1 && sync && dd if=/dev/zero of=/tmp/b bs=1M count=30 2>&1; sync"})
	if err != nil || !strings.Contains(res.Stdout, "Disk quota exceeded") {
		t.Fatalf("write past a claimed sandbox's 40 MB quota: %+v %v", res, err)
	}
	det, err = c.Sandboxes.Get(ctx, sb.SandboxID)
	if err != nil || det.MemoryMB != 96 || det.DiskSizeMB != 40 {
		t.Fatalf("claimed sandbox's record: %+v %v", det, err)
	}
	// The env vars outlive a restart of its processes (a rollback).
	turn, err := c.Snapshots.Turn(ctx, sb.SandboxID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Snapshots.Rollback(ctx, sb.SandboxID, client.RollbackRequest{SnapshotID: turn.SnapshotID}); err != nil {
		t.Fatal(err)
	}
	res, err = c.Commands.ExecWait(ctx, sb.SandboxID, client.ExecRequest{Command: "echo $K"})
	if err != nil || strings.TrimSpace(res.Stdout) != "v" {
		t.Fatalf("env after a rollback of a claimed sandbox: %+v %v", res, err)
	}
	if p, _ := c.Pools.List(ctx); p[0].Hits != 4 || p[0].Misses != 0 {
		t.Fatalf("a create with its own env and limits missed the pool: %+v", p[0])
	}
	// A rebuilt template replaces the pool's sandboxes. The pool is full
	// first, so that no refill is under way: a refill that reads the
	// template after the rebuild is of the new build, and is rightly kept.
	expiredBefore := waitReady(3).Expired
	d.mustCLI("template", "build", "bb", "--busybox", "--replace", "--data-dir", d.dataDir)
	deadline := time.Now().Add(30 * time.Second)
	for {
		p, err := c.Pools.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if p[0].Expired >= expiredBefore+3 && p[0].Ready == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pool did not replace its sandboxes after a rebuild: %+v", p[0])
		}
		time.Sleep(100 * time.Millisecond)
	}
	if out := d.mustCLI("pools"); !strings.Contains(out, "bb") {
		t.Fatalf("warren pools: %q", out)
	}
	for _, id := range append(ids, sb.SandboxID) {
		if err := c.Sandboxes.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
}

// TestWarmPoolPerRuntime keeps a gVisor and a native pool of one template:
// GET /pools names each one's runtime, and a create claims from the pool
// of the runtime it asks for, getting a sandbox of that runtime.
func TestWarmPoolPerRuntime(t *testing.T) {
	t.Parallel()
	d := gvisorDaemon(t, "--pool", "bb@gvisor=1", "--pool", "bb=1")
	c := d.client()
	ctx := ctxT(t, 3*time.Minute)
	byRuntime := func() map[string]client.Pool {
		pools, err := c.Pools.List(ctx)
		if err != nil || len(pools) != 2 {
			t.Fatalf("pools: %+v %v", pools, err)
		}
		out := map[string]client.Pool{}
		for _, p := range pools {
			out[p.Runtime] = p
		}
		return out
	}
	deadline := time.Now().Add(90 * time.Second)
	for p := byRuntime(); p["gvisor"].Ready != 1 || p["native"].Ready != 1; p = byRuntime() {
		if time.Now().After(deadline) {
			t.Fatalf("the pools never filled: %+v", p)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, rt := range []string{"gvisor", "native"} {
		sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", Runtime: rt})
		if err != nil {
			t.Fatalf("create on %s: %v", rt, err)
		}
		det, err := c.Sandboxes.Get(ctx, sb.SandboxID)
		if err != nil || det.Runtime != rt {
			t.Fatalf("the %s claim runs on %q: %v", rt, det.Runtime, err)
		}
		res, err := c.Commands.ExecWait(ctx, sb.SandboxID, client.ExecRequest{Cmd: []string{"echo", "warm"}})
		if err != nil || res.Stdout != "warm\n" {
			t.Fatalf("exec in the %s claim: %+v %v", rt, res, err)
		}
	}
	p := byRuntime()
	if p["gvisor"].Hits != 1 || p["native"].Hits != 1 || p["gvisor"].Misses != 0 || p["native"].Misses != 0 {
		t.Fatalf("each pool served its runtime's create once: %+v", p)
	}
}
