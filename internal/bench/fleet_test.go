//go:build kube

package bench

import (
	"strings"
	"testing"
	"time"
)

func TestFleetPairOf(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var out []time.Duration
		for _, x := range v {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	p := pairOf(ms(3, 3, 3, 9), ms(2, 2, 2, 4))
	if p.Gateway.P50 != 3 || p.Direct.P50 != 2 || p.AddedP50 != 1 || p.RatioP50 != 1.5 || p.AddedP99 != 5 || p.RatioP99 != 2.25 {
		t.Errorf("pairOf = %+v", p)
	}
	// A gateway faster than the node (noise) reads as a negative addition.
	if p := pairOf(ms(1), ms(2)); p.AddedP50 != -1 || p.RatioP50 != 0.5 {
		t.Errorf("pairOf of a faster gateway = %+v", p)
	}
}

func TestFleetOptionsCheck(t *testing.T) {
	good := FleetOptions{Binary: "/bin/warren", Nodes: 2, Creates: 1, Execs: 1, LostSandboxes: 1, Lease: 3 * time.Second}
	for _, tc := range []struct {
		change func(*FleetOptions)
		want   string
	}{
		{func(o *FleetOptions) { o.Nodes = 1 }, "at least 2 nodes"},
		{func(o *FleetOptions) { o.Execs = 0 }, "at least one of each sample"},
		{func(o *FleetOptions) { o.Lease = 100 * time.Millisecond }, "want at least 1s"},
		{func(o *FleetOptions) { o.Binary = "" }, "path of the warren binary"},
	} {
		o := good
		tc.change(&o)
		if err := o.check(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("check(%+v) = %v, want an error saying %q", o, err, tc.want)
		}
	}
}
