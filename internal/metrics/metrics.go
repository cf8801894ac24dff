package metrics

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"sync"
	"time"
)

// Options configure Metrics.
type Options struct {
	Sampler SamplerConfig
	// States counts the sandboxes in each lifecycle state (for the
	// warren_sandboxes gauge); nil leaves the gauge out.
	States func(ctx context.Context) (map[string]int, error)
	// PoolPath is a path on the storage pool's filesystem ("" = unknown).
	PoolPath string
	Version  string
	// Pools reports the warm pools (nil: no pool series).
	Pools func() []PoolStat
	// Errors keeps the daemon's latest errors (nil: a new one).
	Errors *Errors
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Metrics is everything the API's /health, /metrics and
// /sandboxes/{id}/metrics read.
type Metrics struct {
	opts    Options
	Sampler *Sampler
	started time.Time

	requests *histograms // route, code
	ops      *histograms // op

	timeoutsMu sync.Mutex
	timeouts   map[[2]string]uint64 // timeout, action → times fired
}

// PoolStat is one warm pool as the metrics show it.
type PoolStat struct {
	Template     string
	Network      bool // the pool holds networked sandboxes
	Ready        int
	Min, Max     int
	Hits, Misses int64
}

// CountTimeout counts a timeout that fired (run, idle, retention) and the
// action it took (kill, pause, hibernate).
func (m *Metrics) CountTimeout(timeout, action string) {
	m.timeoutsMu.Lock()
	defer m.timeoutsMu.Unlock()
	m.timeouts[[2]string{timeout, action}]++
}

// New returns Metrics; call Run to start sampling.
func New(opts Options) *Metrics {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Errors == nil {
		opts.Errors = NewErrors(0, opts.Now)
	}
	return &Metrics{
		opts:     opts,
		Sampler:  NewSampler(opts.Sampler),
		started:  opts.Now(),
		requests: newHistograms("route", "code"),
		ops:      newHistograms("op"),
		timeouts: map[[2]string]uint64{},
	}
}

// Run samples the sandboxes until ctx is done.
func (m *Metrics) Run(ctx context.Context) { m.Sampler.Run(ctx) }

// Uptime is how long ago the metrics (the daemon) started.
func (m *Metrics) Uptime() time.Duration { return m.opts.Now().Sub(m.started) }

// Errors are the daemon's latest errors.
func (m *Metrics) Errors() *Errors { return m.opts.Errors }

// Pool reads the storage pool's fill level.
func (m *Metrics) Pool() (Pool, error) {
	if m.opts.PoolPath == "" {
		return Pool{}, fmt.Errorf("no pool path configured")
	}
	return StatPool(m.opts.PoolPath)
}

// operations maps the route patterns whose latency is worth its own
// histogram to an operation name. Exec's time is the command's run time:
// its output streams until the command exits.
var operations = map[string]string{
	"POST /sandboxes":                "create",
	"POST /v2/sandboxes":             "create",
	"DELETE /sandboxes/{id}":         "delete",
	"POST /sandboxes/{id}/exec":      "exec",
	"POST /sandboxes/{id}/snapshots": "snapshot",
	"POST /sandboxes/{id}/turns":     "turn",
	"POST /sandboxes/{id}/rollback":  "rollback",
	"POST /sandboxes/{id}/fork":      "fork",
}

// ObserveRequest records one API request. pattern is the ServeMux pattern
// that matched (r.Pattern), which keeps the label set bounded: ids never
// become labels.
func (m *Metrics) ObserveRequest(pattern string, status int, d time.Duration) {
	if pattern == "" || pattern == "/" {
		pattern = "unmatched"
	}
	m.requests.observe(d, pattern, strconv.Itoa(status))
	if op, ok := operations[pattern]; ok && status < 300 {
		m.ops.observe(d, op)
	}
}

// WritePrometheus writes every metric in Prometheus's text format.
// withSandboxes adds per-sandbox series, labelled with sandbox ids.
func (m *Metrics) WritePrometheus(ctx context.Context, w io.Writer, withSandboxes bool) error {
	bw := bufio.NewWriter(w)
	writeGauges(bw, "warren_build_info", "Warren's version (always 1).", []gauge{{labels: []string{label("version", m.opts.Version)}, value: 1}})
	writeGauges(bw, "warren_uptime_seconds", "Seconds since the daemon started.", []gauge{{value: m.Uptime().Seconds()}})
	if m.opts.States != nil {
		counts, err := m.opts.States(ctx)
		if err != nil {
			return fmt.Errorf("count sandboxes by state: %w", err)
		}
		states := make([]string, 0, len(counts))
		for s := range counts {
			states = append(states, s)
		}
		sort.Strings(states)
		var gs []gauge
		for _, s := range states {
			gs = append(gs, gauge{labels: []string{label("state", s)}, value: float64(counts[s])})
		}
		writeGauges(bw, "warren_sandboxes", "Sandboxes by lifecycle state.", gs)
	}
	writeGauges(bw, "warren_sandboxes_sampled", "Sandboxes whose resource counters the last sampling pass read.", []gauge{{value: float64(m.Sampler.Live())}})
	if p, err := m.Pool(); err == nil {
		writeGauges(bw, "warren_pool_used_bytes", "Bytes used on the storage pool's filesystem.", []gauge{{value: float64(p.UsedBytes)}})
		writeGauges(bw, "warren_pool_size_bytes", "Size of the storage pool's filesystem.", []gauge{{value: float64(p.TotalBytes)}})
	}
	m.writePools(bw)
	m.writeTimeouts(bw)
	writeCounters(bw, "warren_errors_total", "Errors the daemon hit: failed background operations, failed sandboxes, 5xx answers (GET /health lists the latest).", []gauge{{value: float64(m.opts.Errors.Total())}})
	m.requests.write(bw, "warren_http_request_duration_seconds", "API request latency by route pattern and status code.")
	m.ops.write(bw, "warren_operation_duration_seconds", "Latency of successful sandbox operations (create, exec, snapshot, turn, rollback, fork, delete).")
	if withSandboxes {
		m.writeSandboxes(bw)
	}
	return bw.Flush()
}

func (m *Metrics) writePools(w io.Writer) {
	if m.opts.Pools == nil {
		return
	}
	stats := m.opts.Pools()
	sort.Slice(stats, func(i, j int) bool {
		if stats[i].Template != stats[j].Template {
			return stats[i].Template < stats[j].Template
		}
		return !stats[i].Network && stats[j].Network
	})
	series := func(v func(PoolStat) float64) []gauge {
		gs := make([]gauge, 0, len(stats))
		for _, p := range stats {
			gs = append(gs, gauge{labels: []string{label("template", p.Template), label("network", strconv.FormatBool(p.Network))}, value: v(p)})
		}
		return gs
	}
	writeGauges(w, "warren_warm_pool_ready", "Ready sandboxes in the warm pool.", series(func(p PoolStat) float64 { return float64(p.Ready) }))
	writeGauges(w, "warren_warm_pool_min", "Ready sandboxes the warm pool refills to.", series(func(p PoolStat) float64 { return float64(p.Min) }))
	writeGauges(w, "warren_warm_pool_max", "Most sandboxes the warm pool holds.", series(func(p PoolStat) float64 { return float64(p.Max) }))
	writeCounters(w, "warren_warm_pool_hits_total", "Creates served from the warm pool.", series(func(p PoolStat) float64 { return float64(p.Hits) }))
	writeCounters(w, "warren_warm_pool_misses_total", "Creates of the pool's template that found it empty.", series(func(p PoolStat) float64 { return float64(p.Misses) }))
	// The ratio is derivable from the two counters; it is here too for a
	// dashboard that reads one number (0 before the first create).
	writeGauges(w, "warren_warm_pool_hit_ratio", "Hits over all creates of the pool's template since the daemon started.", series(func(p PoolStat) float64 {
		if p.Hits+p.Misses == 0 {
			return 0
		}
		return float64(p.Hits) / float64(p.Hits+p.Misses)
	}))
}

func (m *Metrics) writeTimeouts(w io.Writer) {
	m.timeoutsMu.Lock()
	keys := make([][2]string, 0, len(m.timeouts))
	for k := range m.timeouts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i][0] != keys[j][0] {
			return keys[i][0] < keys[j][0]
		}
		return keys[i][1] < keys[j][1]
	})
	cs := make([]gauge, 0, len(keys))
	for _, k := range keys {
		cs = append(cs, gauge{labels: []string{label("timeout", k[0]), label("action", k[1])}, value: float64(m.timeouts[k])})
	}
	m.timeoutsMu.Unlock()
	writeCounters(w, "warren_timeouts_fired_total", "Timeouts that fired (run, idle, retention) by the action taken (kill, pause, hibernate).", cs)
}

func (m *Metrics) writeSandboxes(w io.Writer) {
	latest := m.Sampler.Latest()
	ids := make([]string, 0, len(latest))
	for id := range latest {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	series := func(v func(Sample) float64) []gauge {
		gs := make([]gauge, 0, len(ids))
		for _, id := range ids {
			gs = append(gs, gauge{labels: []string{label("sandbox", id)}, value: v(latest[id])})
		}
		return gs
	}
	writeGauges(w, "warren_sandbox_cpu_used_percent", "CPU used over the last interval, in percent of the sandbox's CPU quota.", series(func(s Sample) float64 { return s.CPUUsedPct }))
	writeGauges(w, "warren_sandbox_memory_used_bytes", "Memory used by the sandbox, without reclaimable page cache.", series(func(s Sample) float64 { return float64(s.MemUsed) }))
	writeGauges(w, "warren_sandbox_memory_limit_bytes", "The sandbox's memory limit (0 = none).", series(func(s Sample) float64 { return float64(s.MemTotal) }))
	writeGauges(w, "warren_sandbox_pids", "Tasks in the sandbox.", series(func(s Sample) float64 { return float64(s.Pids) }))
	writeGauges(w, "warren_sandbox_disk_used_bytes", "Bytes charged to the sandbox's quota group (-1 = unknown).", series(func(s Sample) float64 { return float64(s.DiskUsed) }))
}
