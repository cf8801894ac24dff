package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/client"
)

// TestWarmPool runs a daemon with a pool of 3 ready sandboxes: 3 creates
// are served from it, it refills, and a create the pool cannot serve (its
// own env vars) still works, cold.
func TestWarmPool(t *testing.T) {
	d := newDaemon(t, "--pool", "bb=3")
	d.start()
	d.mustCLI("template", "build", "bb", "--busybox", "--data-dir", d.dataDir)
	c := d.client()
	ctx := ctxT(t, 2*time.Minute)
	waitReady := func(want int) client.Pool {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			pools, err := c.ListPools(ctx)
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
		sb, err := c.CreateSandbox(ctx, client.NewSandbox{TemplateID: "bb", Metadata: map[string]string{"n": "x"}})
		if err != nil {
			t.Fatal(err)
		}
		created := time.Since(start)
		res, err := c.ExecWait(ctx, sb.SandboxID, client.ExecRequest{Cmd: []string{"echo", "warm"}})
		if err != nil || res.Stdout != "warm\n" {
			t.Fatalf("exec in a claimed sandbox: %+v %v", res, err)
		}
		t.Logf("claim %d: create %v, → first output %v", i, created, time.Since(start))
		ids = append(ids, sb.SandboxID)
	}
	p, _ := c.ListPools(ctx)
	if p[0].Hits != 3 {
		t.Fatalf("pool hits %d, want 3: %+v", p[0].Hits, p[0])
	}
	waitReady(3) // refilled
	// A claimed sandbox is the team's: listed, with its metadata.
	det, err := c.GetSandbox(ctx, ids[0])
	if err != nil || det.Metadata["n"] != "x" || det.TemplateID != "bb" {
		t.Fatalf("claimed sandbox: %+v %v", det, err)
	}
	// A create with env vars is not served from the pool, and still works.
	sb, err := c.CreateSandbox(ctx, client.NewSandbox{TemplateID: "bb", EnvVars: map[string]string{"K": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.ExecWait(ctx, sb.SandboxID, client.ExecRequest{Command: "echo $K"})
	if err != nil || strings.TrimSpace(res.Stdout) != "v" {
		t.Fatalf("cold create with env: %+v %v", res, err)
	}
	if p, _ := c.ListPools(ctx); p[0].Misses != 1 {
		t.Fatalf("misses: %+v", p[0])
	}
	if out := d.mustCLI("pools"); !strings.Contains(out, "bb") {
		t.Fatalf("warren pools: %q", out)
	}
	for _, id := range append(ids, sb.SandboxID) {
		if err := c.DeleteSandbox(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
}
