package e2e

import (
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warrenhq/warren/client"
)

// TestStartGate: with --max-concurrent-starts 2, twenty creates at once
// all succeed and run commands; the gate's series show the limit, every
// start admitted, some of them queued with their wait summed, and nothing
// left running or waiting.
func TestStartGate(t *testing.T) {
	t.Parallel()
	d := busyboxDaemon(t, "--max-concurrent-starts", "2")
	c := d.client()
	ctx := ctxT(t, 5*time.Minute)

	const n = 20
	ids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb"})
			if err != nil {
				errs[i] = err
				return
			}
			ids[i] = sb.SandboxID
			res, err := c.Commands.ExecWait(ctx, sb.SandboxID, client.ExecRequest{Cmd: []string{"echo", "ready"}})
			if err == nil && (res.ExitCode != 0 || strings.TrimSpace(res.Stdout) != "ready") {
				t.Errorf("sandbox %s: echo exited %d with %q", sb.SandboxID, res.ExitCode, res.Stdout)
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("create %d: %v", i, err)
		}
	}

	prom := httpGet(t, d, "/metrics", d.key, 200)
	metric := func(name string) float64 {
		m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindStringSubmatch(prom)
		if m == nil {
			t.Fatalf("/metrics lacks %s:\n%s", name, prom)
		}
		v, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return v
	}
	if v := metric("warren_start_limit"); v != 2 {
		t.Errorf("warren_start_limit %v, want 2", v)
	}
	if v := metric("warren_starts_total"); v < n {
		t.Errorf("warren_starts_total %v, want at least %d", v, n)
	}
	// Twenty requests at once against two slots, each held for a whole
	// create: some wait.
	if q, w := metric("warren_starts_queued_total"), metric("warren_start_wait_seconds_total"); q < 1 || w <= 0 {
		t.Errorf("starts queued %v, wait seconds %v: want some of both", q, w)
	}
	if r, w := metric("warren_starts_running"), metric("warren_starts_waiting"); r != 0 || w != 0 {
		t.Errorf("after the creates: %v starts running, %v waiting; want none", r, w)
	}
	for _, id := range ids {
		if id != "" {
			if err := c.Sandboxes.Delete(ctx, id); err != nil {
				t.Errorf("delete %s: %v", id, err)
			}
		}
	}
}
