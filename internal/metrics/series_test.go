package metrics

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/warrenhq/warren/internal/runtime"
)

// series pins every family /metrics serves: its type and label names.
// Operators' dashboards and alerts read these names; a change here breaks
// them. (Histograms' le is the format's, not ours.)
var series = map[string]string{
	"warren_build_info":                    "gauge version",
	"warren_uptime_seconds":                "gauge",
	"warren_sandboxes":                     "gauge state",
	"warren_sandboxes_sampled":             "gauge",
	"warren_pool_used_bytes":               "gauge",
	"warren_pool_size_bytes":               "gauge",
	"warren_warm_pool_ready":               "gauge network runtime template",
	"warren_warm_pool_min":                 "gauge network runtime template",
	"warren_warm_pool_max":                 "gauge network runtime template",
	"warren_warm_pool_hits_total":          "counter network runtime template",
	"warren_warm_pool_misses_total":        "counter network runtime template",
	"warren_warm_pool_hit_ratio":           "gauge network runtime template",
	"warren_timeouts_fired_total":          "counter action timeout",
	"warren_errors_total":                  "counter",
	"warren_http_request_duration_seconds": "histogram code route",
	"warren_operation_duration_seconds":    "histogram op",
	// Per sandbox: only on the admin page.
	"warren_sandbox_cpu_used_percent":   "gauge sandbox",
	"warren_sandbox_memory_used_bytes":  "gauge sandbox",
	"warren_sandbox_memory_limit_bytes": "gauge sandbox",
	"warren_sandbox_pids":               "gauge sandbox",
	"warren_sandbox_disk_used_bytes":    "gauge sandbox",
}

// fullMetrics has a value behind every series: a sampled sandbox, a pool,
// a fired timeout, an error, requests.
func fullMetrics(t *testing.T) *Metrics {
	t.Helper()
	fs := &fakeStats{m: map[string]runtime.Stats{}}
	m := New(Options{
		Version:  "1.2.3",
		PoolPath: t.TempDir(),
		Sampler:  SamplerConfig{IDs: fs.ids, Stats: fs},
		States: func(ctx context.Context) (map[string]int, error) {
			return map[string]int{"running": 1, "paused": 0}, nil
		},
		Pools: func() []PoolStat { return []PoolStat{{Template: "base", Ready: 1, Min: 1, Max: 2, Hits: 1}} },
	})
	t0 := time.Unix(1_700_000_000, 0)
	for i := range 2 {
		fs.mu.Lock()
		fs.m["sb1"] = runtime.Stats{CPUUsageNanos: uint64(i) * 5e8, MemoryBytes: 1 << 20, Pids: 3, At: t0.Add(time.Duration(i) * time.Second)}
		fs.mu.Unlock()
		m.Sampler.SampleOnce(context.Background())
	}
	m.CountTimeout("run", "kill")
	m.Errors().Record("destroy sandbox", "sb1", "EBUSY")
	m.ObserveRequest("POST /sandboxes/{id}/exec", 200, 30*time.Millisecond)
	return m
}

// families parses an exposition into each family's "type labels…".
func families(t *testing.T, text string) map[string]string {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("parse the exposition: %v\n%s", err, text)
	}
	out := map[string]string{}
	for name, f := range fams {
		var labels []string
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if !slices.Contains(labels, l.GetName()) {
					labels = append(labels, l.GetName())
				}
			}
		}
		sort.Strings(labels)
		out[name] = strings.Join(append([]string{strings.ToLower(dto.MetricType_name[int32(f.GetType())])}, labels...), " ")
	}
	return out
}

func TestSeriesArePinned(t *testing.T) {
	m := fullMetrics(t)
	got := families(t, scrape(t, m, true))
	for name, want := range series {
		if got[name] != want {
			t.Errorf("%s: %q, want %q", name, got[name], want)
		}
	}
	for name := range got {
		if _, ok := series[name]; !ok {
			t.Errorf("unpinned family %s (%s): add it to series if it is meant", name, got[name])
		}
	}
	public := families(t, scrape(t, m, false))
	for name := range series {
		_, ok := public[name]
		if perSandbox := strings.HasPrefix(name, "warren_sandbox_"); ok == perSandbox {
			t.Errorf("%s on the public page: %v, want %v", name, ok, !perSandbox)
		}
	}
}

// scrape reads the exposition, with or without the per-sandbox series.
func scrape(t testing.TB, m *Metrics, withSandboxes bool) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler(withSandboxes).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", rec.Code, rec.Body)
	}
	return rec.Body.String()
}

// BenchmarkScrape: one admin scrape with 200 sampled sandboxes and 40
// routes' histograms.
func BenchmarkScrape(b *testing.B) {
	fs := &fakeStats{m: map[string]runtime.Stats{}}
	m := New(Options{Version: "1", PoolPath: b.TempDir(), Sampler: SamplerConfig{IDs: fs.ids, Stats: fs},
		States: func(ctx context.Context) (map[string]int, error) { return map[string]int{"running": 200}, nil }})
	t0 := time.Unix(1_700_000_000, 0)
	for i := range 2 {
		for n := range 200 {
			fs.m[fmt.Sprintf("sb%d", n)] = runtime.Stats{CPUUsageNanos: uint64(i) * 5e8, MemoryBytes: 1 << 20, Pids: 3, At: t0.Add(time.Duration(i) * time.Second)}
		}
		m.Sampler.SampleOnce(context.Background())
	}
	for n := range 40 {
		m.ObserveRequest(fmt.Sprintf("GET /r%d", n), 200, time.Millisecond)
	}
	b.ReportAllocs()
	for b.Loop() {
		scrape(b, m, true)
	}
}
