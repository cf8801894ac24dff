package metrics

import (
	"bytes"
	"context"
	"strings"
	"testing"
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
	var buf bytes.Buffer
	if err := m.WritePrometheus(context.Background(), &buf, false); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"# TYPE warren_warm_pool_hits_total counter\n" +
			`warren_warm_pool_hits_total{template="base",network="false"} 3` + "\n" +
			`warren_warm_pool_hits_total{template="web",network="false"} 0`,
		`warren_warm_pool_ready{template="base",network="false"} 2`,
		`warren_warm_pool_min{template="base",network="false"} 2`,
		`warren_warm_pool_max{template="base",network="false"} 4`,
		`warren_warm_pool_misses_total{template="base",network="false"} 1`,
		`warren_warm_pool_hit_ratio{template="base",network="false"} 0.75`,
		`warren_warm_pool_hit_ratio{template="web",network="false"} 0`,
		"# TYPE warren_timeouts_fired_total counter\n" +
			`warren_timeouts_fired_total{timeout="idle",action="pause"} 1` + "\n" +
			`warren_timeouts_fired_total{timeout="run",action="kill"} 2`,
		"warren_errors_total 1",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, out)
		}
	}
}
