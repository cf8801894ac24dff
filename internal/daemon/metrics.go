package daemon

import (
	"context"
	"path/filepath"
	"slices"

	"github.com/warrenhq/warren/internal/metrics"
	"github.com/warrenhq/warren/internal/runtime"
	"github.com/warrenhq/warren/internal/session"
	"github.com/warrenhq/warren/internal/storage"
	"github.com/warrenhq/warren/internal/store"
)

// metricStates are the states the warren_sandboxes gauge reports: every
// state of the lifecycle but destroyed (destroyed sandboxes are history,
// not load).
var metricStates = slices.DeleteFunc(session.States(), func(s store.SandboxState) bool { return s == session.StateDestroyed })

// newMetrics wires the metrics sampler to the runtime (which sandboxes
// exist, their cgroup counters), the storage (disk per sandbox, pool fill
// level) and the store (sandboxes by state).
func (d *Daemon) newMetrics(errs *metrics.Errors) *metrics.Metrics {
	poolPath := filepath.Dir(d.Storage.Path(storage.Key{Kind: storage.KindSandbox, Name: "x"}))
	cfg := metrics.SamplerConfig{IDs: d.Runtime.List, Log: d.log}
	if sr, ok := d.Runtime.(runtime.StatsReader); ok {
		cfg.Stats = sr
	}
	if q, ok := d.Storage.(storage.QuotaGroups); ok {
		cfg.Disk = func(ctx context.Context, id string) (int64, int64, error) {
			used, limit, err := q.GroupUsage(ctx, id)
			if err == nil && limit == 0 {
				// No cap: the sandbox may fill the pool.
				if p, perr := metrics.StatPool(poolPath); perr == nil {
					limit = p.TotalBytes
				}
			}
			return used, limit, err
		}
	}
	return metrics.New(metrics.Options{
		Sampler:  cfg,
		PoolPath: poolPath,
		Errors:   errs,
		Pools: func() []metrics.PoolStat {
			var out []metrics.PoolStat
			for _, p := range d.Sessions.PoolStats() {
				out = append(out, metrics.PoolStat{Template: p.Template, Network: p.Network, Runtime: p.PinnedRuntime, Ready: p.Ready, Min: p.Min, Max: p.Max, Hits: p.Hits, Misses: p.Misses})
			}
			return out
		},
		Version: Version,
		States:  sandboxesByState(d.Store),
		Starts:  d.starts.Stats,
	})
}

// sandboxesByState counts the sandboxes in each of metricStates, for the
// warren_sandboxes gauge (a state with none is a 0, not a missing series).
func sandboxesByState(st *store.Store) func(ctx context.Context) (map[string]int, error) {
	return func(ctx context.Context) (map[string]int, error) {
		out := make(map[string]int, len(metricStates))
		for _, s := range metricStates {
			n, err := st.CountSandboxes(ctx, s)
			if err != nil {
				return nil, err
			}
			out[string(s)] = n
		}
		return out, nil
	}
}

// onEvent hears of every step of a sandbox's life: it goes into the
// sandbox's log, and a sandbox that failed is among the daemon's errors.
func (d *Daemon) onEvent(e store.Event) {
	d.Logs.Event(e.SandboxID, eventLevel(e), eventLine(e))
	d.nudgeCluster()
	if e.To == session.StateFailed {
		d.Metrics.Errors().Record("sandbox failed", e.SandboxID, e.Detail)
	}
}
