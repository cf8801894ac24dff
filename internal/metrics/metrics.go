package metrics

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/warrenhq/warren/internal/startgate"
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
	// Starts reports the gate of sandbox starts (nil: no start series).
	Starts func() startgate.Stats
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

	requests *prometheus.HistogramVec // route, code
	ops      *prometheus.HistogramVec // op
	timeouts *prometheus.CounterVec   // timeout, action

	// public serves the daemon's series; admin adds the per-sandbox ones.
	public, admin http.Handler
}

// PoolStat is one warm pool as the metrics show it.
type PoolStat struct {
	Template string
	Network  bool // the pool holds networked sandboxes
	// Runtime the pool names (--pool TEMPLATE@RUNTIME; "" for one that
	// follows its template or the default): a template has a pool per
	// runtime.
	Runtime      string
	Ready        int
	Min, Max     int
	Hits, Misses int64
}

// CountTimeout counts a timeout that fired (run, idle, retention) and the
// action it took (kill, pause, hibernate).
func (m *Metrics) CountTimeout(timeout, action string) {
	m.timeouts.WithLabelValues(timeout, action).Inc()
}

// New returns Metrics; call Start to start sampling.
func New(opts Options) *Metrics {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Errors == nil {
		opts.Errors = NewErrors(0, opts.Now)
	}
	m := &Metrics{opts: opts, Sampler: NewSampler(opts.Sampler), started: opts.Now()}
	m.register()
	return m
}

// Start samples the sandboxes until ctx is done or stop is called. stop
// returns once the sampling goroutine has ended, so that what it reads
// (the runtime, the storage) can be closed after it.
func (m *Metrics) Start(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.Sampler.Run(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

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
	m.requests.WithLabelValues(pattern, strconv.Itoa(status)).Observe(d.Seconds())
	if op, ok := operations[pattern]; ok && status < 300 {
		m.ops.WithLabelValues(op).Observe(d.Seconds())
	}
}

// Handler serves every metric in Prometheus's text format. withSandboxes
// adds the per-sandbox series, labelled with sandbox ids.
func (m *Metrics) Handler(withSandboxes bool) http.Handler {
	if withSandboxes {
		return m.admin
	}
	return m.public
}
