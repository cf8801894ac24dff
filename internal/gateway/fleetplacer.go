package gateway

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/kube/controller"
	"github.com/warrenhq/warren/internal/placement"
)

// FleetPlacer places creates with internal/placement — filter, score, best
// of K sampled nodes — over the gateway's view of the fleet, as the
// controller places Sandbox objects, so a create through the API and a
// kubectl apply see the fleet alike. A create with an idempotency key goes
// to the feasible node its key hashes highest with instead: a retry must
// reach the node of the first attempt, which a random sample would not.
type FleetPlacer struct {
	Policy placement.Policy

	mu  sync.Mutex // rng is not safe for concurrent use
	rng *rand.Rand
}

// NewFleetPlacer is a FleetPlacer scoring the best of sample nodes.
func NewFleetPlacer(sample int) *FleetPlacer {
	return &FleetPlacer{
		Policy: placement.Policy{Sample: sample, Weights: placement.DefaultWeights},
		rng:    rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
	}
}

var _ Placer = (*FleetPlacer)(nil)

// Place chooses among nodes; one read without its WarrenNode (which the
// gateway's view always has) is left out.
func (p *FleetPlacer) Place(_ context.Context, req PlaceRequest, nodes []Node) (Node, error) {
	now := time.Now()
	pnodes := make([]placement.Node, 0, len(nodes))
	from := make([]Node, 0, len(nodes))
	for _, n := range nodes {
		if n.Object == nil {
			continue
		}
		var has func(string) bool
		if req.FromSnapshot != "" && n.HoldsSnapshot {
			has = placement.SnapshotSet(req.FromSnapshot)
		}
		pnodes = append(pnodes, controller.NodeFromKube(n.Object, n.Lease, now, has))
		from = append(from, n)
	}
	preq := placement.Request{
		Template:    placement.Intern(req.Template),
		Runtime:     placement.Intern(req.Runtime),
		MemoryBytes: req.MemoryBytes,
		MilliCPU:    req.MilliCPU,
		DiskBytes:   req.DiskBytes,
		Snapshot:    req.FromSnapshot,
	}
	if req.FromSnapshot != "" {
		// A snapshot id is no template name: the holder's node answers for
		// it, so placement must not filter on it.
		preq.Template = ""
	}
	policy := p.Policy
	if req.IdempotencyKey != "" {
		// Every feasible node scored: the candidates are then the feasible
		// set the key picks from.
		policy.Sample = len(pnodes)
	}
	p.mu.Lock()
	d, err := policy.Choose(pnodes, preq, p.rng)
	p.mu.Unlock()
	if err != nil {
		if !errdefs.IsResourceExhausted(err) {
			// No node is in a state to take it (none Ready, drained, the
			// template or runtime nowhere): the fleet is unavailable for
			// this create (503), which no node's failure caused (502).
			err = fmt.Errorf("%w: %w", errNoNode, err)
		}
		return Node{}, err
	}
	if req.IdempotencyKey != "" {
		feasible := make([]Node, 0, len(d.Candidates))
		for _, c := range d.Candidates {
			for _, n := range from {
				if n.Name == c.Node {
					feasible = append(feasible, n)
				}
			}
		}
		return byKey(req.IdempotencyKey, feasible), nil
	}
	return from[d.Index], nil
}
