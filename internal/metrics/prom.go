package metrics

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// The Prometheus exposition, through client_golang. What warren counts
// itself (requests, timeouts fired) is a vector the library keeps; what is
// sampled (sandboxes by state, pools, each sandbox's latest sample, the
// errors' total) is read when /metrics is scraped, by collectors that hold
// no copy of it, so nothing is counted twice.

// latencyBuckets are the upper bounds (seconds) of every latency histogram:
// from a cached hot-path call (~1 ms) to a long command (1 min).
var latencyBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// statesTimeout bounds the store query behind warren_sandboxes: a
// collector gets no request context.
const statesTimeout = 5 * time.Second

// register makes m's vectors and its two handlers: the public one serves
// the daemon's series, the admin one adds the per-sandbox series.
func (m *Metrics) register() {
	m.requests = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "warren_http_request_duration_seconds", Help: "API request latency by route pattern and status code.", Buckets: latencyBuckets,
	}, []string{"route", "code"})
	m.ops = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "warren_operation_duration_seconds", Help: "Latency of successful sandbox operations (create, exec, snapshot, turn, rollback, fork, delete).", Buckets: latencyBuckets,
	}, []string{"op"})
	m.timeouts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "warren_timeouts_fired_total", Help: "Timeouts that fired (run, idle, retention) by the action taken (kill, pause, hibernate).",
	}, []string{"timeout", "action"})

	daemon := prometheus.NewRegistry()
	daemon.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "warren_build_info", Help: "Warren's version (always 1).", ConstLabels: prometheus.Labels{"version": m.opts.Version},
		}, func() float64 { return 1 }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "warren_uptime_seconds", Help: "Seconds since the daemon started."},
			func() float64 { return m.Uptime().Seconds() }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "warren_sandboxes_sampled", Help: "Sandboxes whose resource counters the last sampling pass read."},
			func() float64 { return float64(m.Sampler.Live()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "warren_errors_total", Help: "Errors the daemon hit: failed background operations, failed sandboxes, 5xx answers (GET /health lists the latest).",
		}, func() float64 { return float64(m.opts.Errors.Total()) }),
		m.poolFill(), m.requests, m.ops, m.timeouts,
	)
	if m.opts.States != nil {
		daemon.MustRegister(m.states())
	}
	if m.opts.Pools != nil {
		daemon.MustRegister(m.warmPools())
	}
	if m.opts.Starts != nil {
		daemon.MustRegister(m.starts())
	}
	sandboxes := prometheus.NewRegistry()
	sandboxes.MustRegister(m.sandboxes())

	// A collector that fails (the store's count) is logged, and the other
	// series are still served.
	opts := promhttp.HandlerOpts{ErrorLog: errorLog{m.Sampler.cfg.Log}, ErrorHandling: promhttp.ContinueOnError}
	m.public = promhttp.HandlerFor(daemon, opts)
	m.admin = promhttp.HandlerFor(prometheus.Gatherers{daemon, sandboxes}, opts)
}

// states is warren_sandboxes, counted in the store at each scrape.
func (m *Metrics) states() prometheus.Collector {
	return newTable([]string{"state"},
		func() ([]entry[int], error) {
			ctx, cancel := context.WithTimeout(context.Background(), statesTimeout)
			defer cancel()
			counts, err := m.opts.States(ctx)
			if err != nil {
				return nil, fmt.Errorf("count sandboxes by state: %w", err)
			}
			return entries(counts), nil
		},
		entry[int].labels,
		gauge("warren_sandboxes", "Sandboxes by lifecycle state.", func(e entry[int]) float64 { return float64(e.v) }),
	)
}

// poolFill is the storage pool's fill level, one statfs per scrape; no
// series when the pool cannot be read.
func (m *Metrics) poolFill() prometheus.Collector {
	return newTable(nil,
		func() ([]Pool, error) {
			p, err := m.Pool()
			if err != nil {
				return nil, nil
			}
			return []Pool{p}, nil
		},
		func(Pool) []string { return nil },
		gauge("warren_pool_used_bytes", "Bytes used on the storage pool's filesystem.", func(p Pool) float64 { return float64(p.UsedBytes) }),
		gauge("warren_pool_size_bytes", "Size of the storage pool's filesystem.", func(p Pool) float64 { return float64(p.TotalBytes) }),
	)
}

// warmPools are the warm pools' series; hits and misses are the pools'
// own counters, read, not counted again here.
func (m *Metrics) warmPools() prometheus.Collector {
	return newTable([]string{"template", "network", "runtime"},
		func() ([]PoolStat, error) { return m.opts.Pools(), nil },
		func(p PoolStat) []string { return []string{p.Template, strconv.FormatBool(p.Network), p.Runtime} },
		gauge("warren_warm_pool_ready", "Ready sandboxes in the warm pool.", func(p PoolStat) float64 { return float64(p.Ready) }),
		gauge("warren_warm_pool_min", "Ready sandboxes the warm pool refills to.", func(p PoolStat) float64 { return float64(p.Min) }),
		gauge("warren_warm_pool_max", "Most sandboxes the warm pool holds.", func(p PoolStat) float64 { return float64(p.Max) }),
		counter("warren_warm_pool_hits_total", "Creates served from the warm pool.", func(p PoolStat) float64 { return float64(p.Hits) }),
		counter("warren_warm_pool_misses_total", "Creates of the pool's template that found it empty.", func(p PoolStat) float64 { return float64(p.Misses) }),
		// The ratio is derivable from the two counters; it is here too
		// for a dashboard that reads one number (0 before the first
		// create).
		gauge("warren_warm_pool_hit_ratio", "Hits over all creates of the pool's template since the daemon started.", func(p PoolStat) float64 {
			if p.Hits+p.Misses == 0 {
				return 0
			}
			return float64(p.Hits) / float64(p.Hits+p.Misses)
		}),
	)
}

// sandboxes are the per-sandbox series: each sampled sandbox's latest
// sample.
func (m *Metrics) sandboxes() prometheus.Collector {
	return newTable([]string{"sandbox"},
		func() ([]entry[Sample], error) { return entries(m.Sampler.Latest()), nil },
		entry[Sample].labels,
		gauge("warren_sandbox_cpu_used_percent", "CPU used over the last interval, in percent of the sandbox's CPU quota.", func(e entry[Sample]) float64 { return e.v.CPUUsedPct }),
		gauge("warren_sandbox_memory_used_bytes", "Memory used by the sandbox, without reclaimable page cache.", func(e entry[Sample]) float64 { return float64(e.v.MemUsed) }),
		gauge("warren_sandbox_memory_limit_bytes", "The sandbox's memory limit (0 = none).", func(e entry[Sample]) float64 { return float64(e.v.MemTotal) }),
		gauge("warren_sandbox_pids", "Tasks in the sandbox.", func(e entry[Sample]) float64 { return float64(e.v.Pids) }),
		gauge("warren_sandbox_disk_used_bytes", "Bytes charged to the sandbox's quota group (-1 = unknown).", func(e entry[Sample]) float64 { return float64(e.v.DiskUsed) }),
	)
}

// entry is one key and value of a map: a table's row labelled by the key
// (a state, a sandbox id).
type entry[V any] struct {
	key string
	v   V
}

func (e entry[V]) labels() []string { return []string{e.key} }

func entries[V any](m map[string]V) []entry[V] {
	out := make([]entry[V], 0, len(m))
	for k, v := range m {
		out = append(out, entry[V]{k, v})
	}
	return out
}

// table is a collector of rows read at scrape time: each row is one
// series (labelled by key) of each family.
type table[T any] struct {
	rows     func() ([]T, error)
	key      func(T) []string // the row's label values, in the labels' order
	families []family[T]
	descs    []*prometheus.Desc // one per family
}

var _ prometheus.Collector = (*table[Pool])(nil)

// newTable makes a table whose series are labelled with labels.
func newTable[T any](labels []string, rows func() ([]T, error), key func(T) []string, families ...family[T]) *table[T] {
	t := &table[T]{rows: rows, key: key, families: families}
	for _, f := range families {
		t.descs = append(t.descs, prometheus.NewDesc(f.name, f.help, labels, nil))
	}
	return t
}

// family is one metric of a table: its name, help, type and value.
type family[T any] struct {
	name, help string
	typ        prometheus.ValueType
	value      func(T) float64
}

func gauge[T any](name, help string, v func(T) float64) family[T] {
	return family[T]{name: name, help: help, typ: prometheus.GaugeValue, value: v}
}

func counter[T any](name, help string, v func(T) float64) family[T] {
	return family[T]{name: name, help: help, typ: prometheus.CounterValue, value: v}
}

func (t *table[T]) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range t.descs {
		ch <- d
	}
}

func (t *table[T]) Collect(ch chan<- prometheus.Metric) {
	rows, err := t.rows()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(t.descs[0], err)
		return
	}
	for _, r := range rows {
		key := t.key(r)
		for i, f := range t.families {
			ch <- prometheus.MustNewConstMetric(t.descs[i], f.typ, f.value(r), key...)
		}
	}
}

// errorLog hands promhttp's errors (a collector that failed) to the log,
// as errors: they count in warren_errors_total.
type errorLog struct{ log *slog.Logger }

func (l errorLog) Println(v ...any) { l.log.Warn("serve /metrics", "err", fmt.Sprint(v...)) }
