package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/warrenhq/warren/client"
)

// TestMetrics drives per-sandbox metrics, /health and /metrics on a real
// daemon: a sandbox that burns CPU and holds memory shows both in its
// samples, health reports the pool, and /metrics is admin-only.
func TestMetrics(t *testing.T) {
	t.Parallel()
	d := busyboxDaemon(t)
	c := d.client()
	ctx := ctxT(t, 3*time.Minute)

	h, err := c.Meta.Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if h.Pool == nil || h.Pool.TotalBytes <= 0 || h.Pool.UsedBytes <= 0 || h.Pool.UsedPct <= 0 {
		t.Fatalf("health without pool usage: %+v", h)
	}
	if h.Status != "ok" && h.Status != "degraded" && h.Status != "unhealthy" || h.Version == "" || h.Sandboxes != 0 {
		t.Fatalf("health: %+v", h)
	}

	sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", Limits: &client.Limits{MemoryMB: 64, CPUCount: 1}})
	if err != nil {
		t.Fatal(err)
	}
	id := sb.SandboxID
	// A CPU loop and 16 MiB in tmpfs (charged to the sandbox's memory),
	// both outliving the exec.
	res, err := c.Commands.ExecWait(ctx, id, client.ExecRequest{Cmd: []string{"sh", "-c",
		"(while :; do :; done) >/dev/null 2>&1 & head -c 16777216 /dev/zero > /dev/shm/blob"}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("start the load: %v %+v", err, res)
	}

	var ms []client.SandboxMetric
	deadline := time.Now().Add(20 * time.Second)
	for {
		time.Sleep(time.Second)
		ms, err = c.Sandboxes.Metrics(ctx, id, time.Time{}, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		busy := 0
		for _, m := range ms {
			if m.CPUUsedPct > 0 && m.MemUsed >= 16<<20 && m.MemTotal == 64<<20 {
				busy++
			}
		}
		if busy >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no 2 samples with CPU > 0, memory >= 16 MiB of 64 MiB after 20 s: %+v", ms)
		}
	}
	last := ms[len(ms)-1]
	t.Logf("last sample: %+v", last)
	// How much of its CPU the loop gets depends on the host's load: the
	// bounds only check the unit (percent of the sandbox's one CPU).
	if last.CPUCount != 1 || last.CPUUsedPct <= 0 || last.CPUUsedPct > 100 {
		t.Errorf("a busy loop on 1 CPU: %d CPUs at %v%%, want 1 at 0-100%%", last.CPUCount, last.CPUUsedPct)
	}
	if last.Pids < 2 || last.TimestampUnix != last.Timestamp.Unix() || time.Since(last.Timestamp) > 10*time.Second {
		t.Errorf("last sample: %+v", last)
	}
	// The raw JSON carries E2B's field names.
	raw := httpGet(t, d, "/sandboxes/"+id+"/metrics", d.key, 200)
	for _, f := range []string{`"timestamp"`, `"cpuCount"`, `"cpuUsedPct"`, `"memUsed"`, `"memTotal"`, `"diskUsed"`, `"diskTotal"`} {
		if !strings.Contains(raw, f) {
			t.Errorf("metrics JSON lacks %s: %s", f, raw[:min(len(raw), 300)])
		}
	}
	// start/end filter (unix seconds).
	if future, err := c.Sandboxes.Metrics(ctx, id, time.Now().Add(time.Hour), time.Time{}); err != nil || len(future) != 0 {
		t.Errorf("metrics from the future: %v %v", future, err)
	}
	if old, err := c.Sandboxes.Metrics(ctx, id, time.Time{}, time.Unix(1000, 0)); err != nil || len(old) != 0 {
		t.Errorf("metrics of 1970: %v %v", old, err)
	}
	httpGet(t, d, "/sandboxes/"+id+"/metrics?start=yesterday", d.key, 400)

	// Another team cannot read them; a non-admin cannot read /metrics.
	k, err := c.APIKeys.Create(ctx, client.NewAPIKey{Team: "other"})
	if err != nil {
		t.Fatal(err)
	}
	other := client.New("http://"+d.addr, k.Key)
	if _, err := other.Sandboxes.Metrics(ctx, id, time.Time{}, time.Time{}); client.StatusCode(err) != 404 {
		t.Errorf("another team's sandbox metrics: %v, want 404", err)
	}
	httpGet(t, d, "/metrics", "", 401)
	httpGet(t, d, "/metrics", k.Key, 403)
	prom := httpGet(t, d, "/metrics", d.key, 200)
	for _, want := range []string{
		`warren_sandboxes{state="running"} 1`,
		`warren_sandbox_memory_limit_bytes{sandbox="` + id + `"} 6.7108864e+07`,
		`warren_operation_duration_seconds_count{op="exec"} 1`,
		`warren_http_request_duration_seconds_count{code="201",route="POST /sandboxes"} 1`,
		"warren_pool_size_bytes ",
	} {
		if !strings.Contains(prom, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, prom)
		}
	}

	// Health counts the sandbox but does not name it.
	body := httpGet(t, d, "/health", "", 200)
	if strings.Contains(body, id) {
		t.Errorf("unauthenticated health names a sandbox: %s", body)
	}
	if err := json.Unmarshal([]byte(body), &h); err != nil || h.Sandboxes != 1 || h.UptimeSeconds < 1 {
		t.Errorf("health with one sandbox: %+v %v", h, err)
	}

	// warren top --once: one line for the sandbox, with its limits.
	out := d.mustCLI("top", "--once")
	t.Logf("warren top --once:\n%s", out)
	if !strings.Contains(out, id) || !strings.Contains(out, "/64MiB") || !strings.Contains(out, "CPU%") {
		t.Errorf("warren top --once:\n%s", out)
	}
	var rows []struct {
		SandboxID string                `json:"sandboxID"`
		Metric    *client.SandboxMetric `json:"metric"`
	}
	if err := json.Unmarshal([]byte(d.mustCLI("top", "--once", "--json")), &rows); err != nil || len(rows) != 1 || rows[0].Metric == nil || rows[0].Metric.MemTotal != 64<<20 {
		t.Errorf("warren top --once --json: %+v %v", rows, err)
	}

	// Deleted: its samples are dropped and the gauge follows.
	if err := c.Sandboxes.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	prom = httpGet(t, d, "/metrics", d.key, 200)
	if !strings.Contains(prom, `warren_sandboxes{state="running"} 0`) {
		t.Errorf("/metrics after delete:\n%s", prom)
	}
}

// TestMetricsPublic: with --metrics-public, /metrics needs no key and
// names no sandbox.
func TestMetricsPublic(t *testing.T) {
	t.Parallel()
	d := newDaemon(t, "--metrics-public")
	d.start()
	prom := httpGet(t, d, "/metrics", "", 200)
	if !strings.Contains(prom, "warren_build_info") || strings.Contains(prom, "warren_sandbox_") {
		t.Errorf("public /metrics:\n%s", prom)
	}
}

// httpGet fetches path with key (if any) and checks the status.
func httpGet(t *testing.T, d *daemon, path, key string, want int) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+d.addr+path, nil)
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("GET %s: %d, want %d: %s", path, resp.StatusCode, want, b)
	}
	return string(b)
}

// TestHealthInFlightAndErrors: GET /health counts the commands running now,
// and a sandbox that fails is among the last errors — listed (with its id)
// to an admin key and by `warren health`, only counted for anyone else.
func TestHealthInFlightAndErrors(t *testing.T) {
	t.Parallel()
	d := busyboxDaemon(t)
	c := d.client()
	ctx := ctxT(t, 2*time.Minute)
	sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb"})
	if err != nil {
		t.Fatal(err)
	}
	id := sb.SandboxID
	t.Cleanup(func() { _ = c.Sandboxes.Delete(ctxT(t, time.Minute), id) })

	// A command runs for a while: health counts it while it runs.
	done := make(chan error, 1)
	go func() {
		_, err := c.Commands.ExecWait(ctx, id, client.ExecRequest{Cmd: []string{"sleep", "3"}})
		done <- err
	}()
	waitFor(t, 10*time.Second, "health to count the command in flight", func() bool {
		h, err := c.Meta.Health(ctx)
		return err == nil && h.CommandsInFlight == 1
	})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if h, err := c.Meta.Health(ctx); err != nil || h.CommandsInFlight != 0 {
		t.Fatalf("health after the command ended: %+v %v", h, err)
	}

	// The sandbox's PID 1 dies: it is failed, and that is a daemon error.
	if err := syscall.Kill(initPID(t, d.dataDir, id), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var h client.Health
	waitFor(t, 15*time.Second, "health to list the failed sandbox", func() bool {
		h, err = c.Meta.Health(ctx)
		return err == nil && len(h.LastErrors) > 0
	})
	e := h.LastErrors[0]
	if e.Op != "sandbox failed" || e.SandboxID != id || !strings.Contains(e.Message, "init process") || time.Since(e.At) > time.Minute || h.ErrorsTotal < 1 {
		t.Errorf("last errors: %+v (total %d)", h.LastErrors, h.ErrorsTotal)
	}
	body := httpGet(t, d, "/health", "", 200)
	if strings.Contains(body, id) || !strings.Contains(body, `"errorsTotal":`) || strings.Contains(body, "lastErrors") {
		t.Errorf("unauthenticated health: %s", body)
	}
	out := d.mustCLI("health")
	t.Logf("warren health:\n%s", out)
	if !strings.Contains(out, "commands in flight:") || !strings.Contains(out, "sandbox failed") || !strings.Contains(out, id) {
		t.Errorf("warren health:\n%s", out)
	}
}
