// Package placementtest makes simulated fleets and requests for placement's
// benchmarks (the Go benchmark and warren bench --suite placement): varied
// enough that every filter rule and score part is exercised.
package placementtest

import (
	"fmt"
	"math/rand/v2"

	"github.com/warrenhq/warren/internal/placement"
)

const gib = int64(1) << 30

// Templates and SnapshotsPerNode size the simulated catalogue.
const (
	Templates        = 20
	SnapshotsPerNode = 50
)

// Fleet makes n nodes, their names interned as the gateway's and the
// controller's are: most ready and live, a few drained, down or lapsed;
// both runtimes on most; a random half of the templates; capacities of a
// few machine sizes, partly used; and each holding SnapshotsPerNode
// snapshots named snap-<node>-<i>.
func Fleet(n int, rng *rand.Rand) []placement.Node {
	nodes := make([]placement.Node, n)
	for i := range nodes {
		size := int64(1 + rng.IntN(4)) // 1..4 × (16 GiB, 8 CPUs, 200 GiB, 100 sandboxes)
		capacity := placement.Resources{MemoryBytes: size * 16 * gib, MilliCPU: size * 8000, DiskBytes: size * 200 * gib, Sandboxes: size * 100}
		load := rng.Float64()
		nd := placement.Node{
			Name:          fmt.Sprintf("node-%05d", i),
			Ready:         rng.IntN(100) >= 2,
			LeaseLive:     rng.IntN(100) >= 1,
			Unschedulable: rng.IntN(100) < 2,
			Runtimes:      []string{placement.Intern("native")},
			Capacity:      capacity,
			Used: placement.Resources{
				MemoryBytes: int64(load * float64(capacity.MemoryBytes)),
				MilliCPU:    int64(load * float64(capacity.MilliCPU)),
				DiskBytes:   int64(load * float64(capacity.DiskBytes)),
				Sandboxes:   int64(load * float64(capacity.Sandboxes)),
			},
		}
		if rng.IntN(10) < 8 {
			nd.Runtimes = append(nd.Runtimes, placement.Intern("gvisor"))
		}
		for t := range Templates {
			if t == 0 || rng.IntN(2) == 0 {
				nd.Templates = append(nd.Templates, Template(t))
			}
		}
		ids := make([]string, SnapshotsPerNode)
		for s := range ids {
			ids[s] = fmt.Sprintf("snap-%d-%d", i, s)
		}
		nd.HasSnapshot = placement.SnapshotSet(ids...)
		nodes[i] = nd
	}
	return nodes
}

// Template is the name of the simulated template t (template-0 is on every
// node).
func Template(t int) string { return placement.Intern(fmt.Sprintf("template-%d", t)) }

// Request makes a create for a fleet of n nodes: most from a template,
// a third of them on gvisor, and one in four from a snapshot some node
// holds.
func Request(n int, rng *rand.Rand) placement.Request {
	req := placement.Request{
		MemoryBytes: int64(1+rng.IntN(4)) * gib / 2,
		MilliCPU:    int64(500 * (1 + rng.IntN(4))),
		DiskBytes:   int64(1+rng.IntN(10)) * gib,
	}
	if rng.IntN(3) == 0 {
		req.Runtime = "gvisor"
	}
	if rng.IntN(4) == 0 {
		req.Snapshot = fmt.Sprintf("snap-%d-%d", rng.IntN(n), rng.IntN(SnapshotsPerNode))
	} else {
		req.Template = Template(rng.IntN(Templates))
	}
	return req
}

// Place records a decision on the fleet as the node would report it, so
// that a run of decisions fills the fleet as a burst of creates does.
func Place(nodes []placement.Node, d placement.Decision, req placement.Request) {
	u := &nodes[d.Index].Used
	u.MemoryBytes += req.MemoryBytes
	u.MilliCPU += req.MilliCPU
	u.DiskBytes += req.DiskBytes
	u.Sandboxes++
}
