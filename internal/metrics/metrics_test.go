package metrics

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestPrometheusPoolsAndTimeouts(t *testing.T) {
	m := New(Options{Pools: func() []PoolStat {
		return []PoolStat{
			{Template: "web", Ready: 1, Min: 1, Max: 2},
			{Template: "base", Ready: 2, Min: 2, Max: 4, Hits: 3, Misses: 1},
		}
	}})
	m.CountTimeout("run", "kill")
	m.CountTimeout("run", "kill")
	m.CountTimeout("idle", "pause")
	m.Errors().Record("destroy sandbox", "sb1", "EBUSY")
	out := scrape(t, m, false)
	for _, want := range []string{
		"# TYPE warren_warm_pool_hits_total counter\n" +
			`warren_warm_pool_hits_total{network="false",runtime="",template="base"} 3` + "\n" +
			`warren_warm_pool_hits_total{network="false",runtime="",template="web"} 0`,
		`warren_warm_pool_ready{network="false",runtime="",template="base"} 2`,
		`warren_warm_pool_min{network="false",runtime="",template="base"} 2`,
		`warren_warm_pool_max{network="false",runtime="",template="base"} 4`,
		`warren_warm_pool_misses_total{network="false",runtime="",template="base"} 1`,
		`warren_warm_pool_hit_ratio{network="false",runtime="",template="base"} 0.75`,
		`warren_warm_pool_hit_ratio{network="false",runtime="",template="web"} 0`,
		"# TYPE warren_timeouts_fired_total counter\n" +
			`warren_timeouts_fired_total{action="kill",timeout="run"} 2` + "\n" +
			`warren_timeouts_fired_total{action="pause",timeout="idle"} 1`,
		"warren_errors_total 1",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, out)
		}
	}
}

// TestScrapeSurvivesAFailedCount: when the store cannot count sandboxes,
// /metrics still serves every other series, and the failure is among the
// daemon's errors.
func TestScrapeSurvivesAFailedCount(t *testing.T) {
	errs := NewErrors(0, nil)
	m := New(Options{
		Version: "1.2.3",
		Errors:  errs,
		Sampler: SamplerConfig{Log: slog.New(errs.Handler(slog.DiscardHandler))},
		States: func(ctx context.Context) (map[string]int, error) {
			return nil, errors.New("database is locked")
		},
	})
	out := scrape(t, m, false)
	if !strings.Contains(out, `warren_build_info{version="1.2.3"} 1`) || strings.Contains(out, "warren_sandboxes{") {
		t.Errorf("/metrics with a failed count:\n%s", out)
	}
	if got := errs.Recent(); len(got) != 1 || !strings.Contains(got[0].Message, "database is locked") {
		t.Errorf("errors = %+v, want the failed count", got)
	}
}

// TestStartStopJoinsTheSampler: stop returns only once the sampling
// goroutine has ended, even when a pass is under way.
func TestStartStopJoinsTheSampler(t *testing.T) {
	inPass := make(chan struct{})
	var ended atomic.Bool
	m := New(Options{Sampler: SamplerConfig{
		Stats: &fakeStats{},
		Log:   slog.New(slog.DiscardHandler),
		IDs: func(ctx context.Context) ([]string, error) {
			close(inPass) // the goroutine is in its first pass
			<-ctx.Done()
			time.Sleep(20 * time.Millisecond) // a pass that ends a while after
			ended.Store(true)
			return nil, ctx.Err()
		},
	}})
	stop := m.Start(context.Background())
	<-inPass
	stop()
	if !ended.Load() {
		t.Fatal("stop returned while the sampler was in a pass")
	}
	stop() // a second stop is harmless
}
