package bench

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/warrenhq/warren/internal/placement"
	"github.com/warrenhq/warren/internal/placement/placementtest"
)

// PlacementOptions size the placement suite: decisions timed on each
// simulated fleet size, K, and the seed of the fleets and requests.
type PlacementOptions struct {
	Nodes     []int
	Decisions int
	Sample    int
	Seed      uint64
}

// PlacementReport is the placement suite's report: one decision's time per
// fleet size. It needs no daemon: placement is a pure function, timed here
// on simulated nodes (placementtest.Fleet) with the requests of a mixed
// burst, each decision's sandbox added to its node as the next report would.
type PlacementReport struct {
	Machine string           `json:"machine"`
	Sample  int              `json:"sample_k"`
	Fleets  []PlacementFleet `json:"fleets"`
}

// PlacementFleet is the suite's result on one fleet size.
type PlacementFleet struct {
	Nodes int `json:"nodes"`
	// Decision is one Choose call's time.
	Decision Stats `json:"decision"`
	// Placed and NoNode count the decisions that found a node and those
	// that did not (every node filtered).
	Placed int `json:"placed"`
	NoNode int `json:"no_node"`
	// Local counts the creates from a snapshot that landed on its holder.
	Local int `json:"local"`
}

// RunPlacement times placement decisions on simulated fleets.
func RunPlacement(o PlacementOptions) (*PlacementReport, error) {
	if len(o.Nodes) == 0 || o.Decisions <= 0 {
		return nil, fmt.Errorf("placement suite: want fleet sizes and at least one decision, got %v nodes and %d decisions", o.Nodes, o.Decisions)
	}
	policy := placement.Policy{Sample: o.Sample}
	rep := &PlacementReport{Machine: machine(), Sample: max(o.Sample, 0)}
	if rep.Sample == 0 {
		rep.Sample = placement.DefaultSample
	}
	for _, n := range o.Nodes {
		if n <= 0 {
			return nil, fmt.Errorf("placement suite: fleet size %d: want at least one node", n)
		}
		rng := rand.New(rand.NewPCG(o.Seed, uint64(n)))
		nodes := placementtest.Fleet(n, rng)
		f := PlacementFleet{Nodes: n}
		samples := make([]time.Duration, 0, o.Decisions)
		for range o.Decisions {
			req := placementtest.Request(n, rng)
			start := time.Now()
			d, err := policy.Choose(nodes, req, rng)
			samples = append(samples, time.Since(start))
			if err != nil {
				f.NoNode++
				continue
			}
			f.Placed++
			if d.HasSnapshot {
				f.Local++
			}
			placementtest.Place(nodes, d, req)
		}
		f.Decision = Summarise(samples)
		rep.Fleets = append(rep.Fleets, f)
	}
	return rep, nil
}
