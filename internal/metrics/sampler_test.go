package metrics

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/runtime"
)

// fakeStats hands out readings a test sets; a missing id is ErrNotFound.
type fakeStats struct {
	mu sync.Mutex
	m  map[string]runtime.Stats
}

func (f *fakeStats) Stats(ctx context.Context, id string) (runtime.Stats, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.m[id]
	if !ok {
		return runtime.Stats{}, fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	return s, nil
}

func (f *fakeStats) ids(ctx context.Context) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for id := range f.m {
		out = append(out, id)
	}
	return out, nil
}

func TestCPUPercent(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ns uint64, d time.Duration) runtime.Stats { return runtime.Stats{CPUUsageNanos: ns, At: t0.Add(d)} }
	cases := []struct {
		name      string
		prev, cur runtime.Stats
		cpus      float64
		want      float64
	}{
		{"one full CPU of one", at(0, 0), at(1e9, time.Second), 1, 100},
		{"half a CPU of one", at(0, 0), at(5e8, time.Second), 1, 50},
		{"one CPU of two", at(0, 0), at(1e9, time.Second), 2, 50},
		{"quarter of a half-CPU quota", at(0, 0), at(125e6, time.Second), 0.5, 25},
		{"over two seconds", at(1e9, 0), at(2e9, 2*time.Second), 1, 50},
		{"burst above quota is capped", at(0, 0), at(3e9, time.Second), 1, 100},
		{"counter reset", at(5e9, 0), at(1e9, time.Second), 1, 0},
		{"no time passed", at(0, 0), at(1e9, 0), 1, 0},
		{"rounded to two decimals", at(0, 0), at(333333333, time.Second), 1, 33.33},
	}
	for _, c := range cases {
		if got := CPUPercent(c.prev, c.cur, c.cpus); got != c.want {
			t.Errorf("%s: CPUPercent = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestSamplerRingsAndMath(t *testing.T) {
	fs := &fakeStats{m: map[string]runtime.Stats{}}
	t0 := time.Unix(1_700_000_000, 0)
	disk := 0
	s := NewSampler(SamplerConfig{
		Keep: 5, IDs: fs.ids, Stats: fs, DiskEvery: 2, HostCPUs: 4,
		Disk: func(ctx context.Context, id string) (int64, int64, error) {
			disk++
			if id == "nodisk" {
				return 0, 0, errdefs.ErrUnsupported
			}
			return int64(disk) << 20, 100 << 20, nil
		},
	})
	ctx := context.Background()
	set := func(id string, i int, ns uint64, millis int64) {
		fs.mu.Lock()
		fs.m[id] = runtime.Stats{CPUUsageNanos: ns, CPULimitMillis: millis, MemoryBytes: int64(i) << 20,
			MemoryLimit: 64 << 20, Pids: 3, PidsLimit: 100, At: t0.Add(time.Duration(i) * time.Second)}
		fs.mu.Unlock()
	}
	// "a" uses half of its 1.5-CPU quota: 0.75 s of CPU per second.
	for i := 0; i < 10; i++ {
		set("a", i, uint64(i)*750e6, 1500)
		set("nodisk", i, uint64(i)*1e9, 0)
		s.SampleOnce(ctx)
	}
	got := s.Range("a", time.Time{}, time.Time{})
	if len(got) != 5 {
		t.Fatalf("kept %d samples, want the ring's 5", len(got))
	}
	for i, smp := range got {
		// 10 readings, 9 samples (the first primes), the last 5 kept: 5..9.
		if want := t0.Add(time.Duration(5+i) * time.Second); !smp.At.Equal(want) {
			t.Errorf("sample %d at %v, want %v (oldest first)", i, smp.At, want)
		}
		if smp.CPUCount != 2 || smp.CPUUsedPct != 50 {
			t.Errorf("sample %d: %d CPUs at %v%%, want 2 at 50%%", i, smp.CPUCount, smp.CPUUsedPct)
		}
		if smp.MemUsed != int64(5+i)<<20 || smp.MemTotal != 64<<20 || smp.Pids != 3 || smp.PidsLimit != 100 {
			t.Errorf("sample %d: %+v", i, smp)
		}
		if smp.DiskTotal != 100<<20 || smp.DiskUsed <= 0 {
			t.Errorf("sample %d: disk %d of %d", i, smp.DiskUsed, smp.DiskTotal)
		}
	}
	// Disk is read on the first pass and every second pass after it.
	if got[0].DiskUsed != got[1].DiskUsed && got[1].DiskUsed != got[2].DiskUsed {
		t.Errorf("disk read on every pass, want every 2nd: %d %d %d", got[0].DiskUsed, got[1].DiskUsed, got[2].DiskUsed)
	}
	nd := s.Range("nodisk", time.Time{}, time.Time{})
	if len(nd) != 5 || nd[0].DiskUsed != -1 || nd[0].DiskTotal != 0 {
		t.Fatalf("nodisk samples %+v, want disk -1/0", nd)
	}
	// No quota: the host's 4 CPUs; one CPU busy = 25 %.
	if nd[0].CPUCount != 4 || nd[0].CPUUsedPct != 25 {
		t.Errorf("unlimited sandbox: %d CPUs at %v%%, want 4 at 25%%", nd[0].CPUCount, nd[0].CPUUsedPct)
	}

	// Time range, inclusive at both ends.
	r := s.Range("a", t0.Add(6*time.Second), t0.Add(8*time.Second))
	if len(r) != 3 {
		t.Errorf("Range 6..8 s: %d samples, want 3", len(r))
	}
	if len(s.Range("a", t0.Add(time.Hour), time.Time{})) != 0 {
		t.Error("Range in the future is not empty")
	}
	if l := s.Latest(); len(l) != 2 || !l["a"].At.Equal(t0.Add(9*time.Second)) {
		t.Errorf("Latest = %+v", l)
	}

	// A sandbox that is gone loses its ring.
	fs.mu.Lock()
	delete(fs.m, "a")
	fs.mu.Unlock()
	s.SampleOnce(ctx)
	if n := len(s.Range("a", time.Time{}, time.Time{})); n != 0 || s.Live() != 1 {
		t.Errorf("after a is gone: %d samples of a, %d live; want 0, 1", n, s.Live())
	}
}

func TestPoolStatus(t *testing.T) {
	for pct, want := range map[float64]string{0: "ok", 84.99: "ok", 85: "degraded", 94.9: "degraded", 95: "unhealthy", 100: "unhealthy"} {
		if got := PoolStatus(pct); got != want {
			t.Errorf("PoolStatus(%v) = %q, want %q", pct, got, want)
		}
	}
	p, err := StatPool(t.TempDir())
	if err != nil || p.TotalBytes <= 0 || p.UsedBytes < 0 || p.UsedPct < 0 || p.UsedPct > 100 {
		t.Errorf("StatPool = %+v, %v", p, err)
	}
}

func TestPrometheusText(t *testing.T) {
	m := New(Options{
		Version:  "1.2.3",
		PoolPath: t.TempDir(),
		States: func(ctx context.Context) (map[string]int, error) {
			return map[string]int{"running": 1, "paused": 0}, nil
		},
	})
	m.ObserveRequest("POST /sandboxes/{id}/exec", 200, 30*time.Millisecond)
	m.ObserveRequest("POST /sandboxes/{id}/exec", 200, 3*time.Second)
	m.ObserveRequest("/", 404, time.Millisecond)
	out := scrape(t, m, false)
	for _, want := range []string{
		`warren_build_info{version="1.2.3"} 1`,
		`warren_sandboxes{state="running"} 1`,
		`warren_sandboxes{state="paused"} 0`,
		"# TYPE warren_http_request_duration_seconds histogram",
		`warren_http_request_duration_seconds_bucket{code="200",route="POST /sandboxes/{id}/exec",le="0.05"} 1`,
		`warren_http_request_duration_seconds_bucket{code="200",route="POST /sandboxes/{id}/exec",le="5"} 2`,
		`warren_http_request_duration_seconds_bucket{code="200",route="POST /sandboxes/{id}/exec",le="+Inf"} 2`,
		`warren_http_request_duration_seconds_count{code="404",route="unmatched"} 1`,
		`warren_operation_duration_seconds_count{op="exec"} 2`,
		`warren_operation_duration_seconds_sum{op="exec"} 3.03`,
		"warren_pool_size_bytes ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("exposition lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "warren_sandbox_cpu") {
		t.Error("per-sandbox series written without withSandboxes")
	}
}
