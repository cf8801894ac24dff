package gateway

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

	mu  sync.Mutex // guards rng (not safe for concurrent use) and recent
	rng *rand.Rand
	// recent are this gateway's placements per node: a node's report
	// counts a sandbox only at its next status write (about a second
	// later), and a burst of creates placed on stale reports would all go
	// to the same node.
	recent map[string][]placed
}

// placed is one placement a node's report may not count yet.
type placed struct {
	at  time.Time
	req placement.Request
	key string // the create's idempotency key: its retries count once
}

// recentWindow bounds how long a placement is remembered: well past a
// node's status writes (every 10 s, and within a second of a change).
const recentWindow = 15 * time.Second

// NewFleetPlacer is a FleetPlacer scoring the best of sample nodes.
func NewFleetPlacer(sample int) *FleetPlacer {
	return &FleetPlacer{
		Policy: placement.Policy{Sample: sample, Weights: placement.DefaultWeights},
		rng:    rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
		recent: map[string][]placed{},
	}
}

// addRecent adds to n's reported use the placements made on it since its
// report (heartbeat; its second precision is why one second before it
// counts too: counting a sandbox twice for a moment only lowers a score)
// and forgets the ones too old to matter.
func (p *FleetPlacer) addRecent(n *placement.Node, heartbeat *metav1.Time, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	kept := p.recent[n.Name][:0]
	for _, pl := range p.recent[n.Name] {
		if now.Sub(pl.at) > recentWindow {
			continue
		}
		kept = append(kept, pl)
		if heartbeat == nil || pl.at.After(heartbeat.Add(-time.Second)) {
			n.Used.MemoryBytes += pl.req.MemoryBytes
			n.Used.MilliCPU += pl.req.MilliCPU
			n.Used.DiskBytes += pl.req.DiskBytes
			n.Used.Sandboxes++
		}
	}
	if len(kept) == 0 {
		delete(p.recent, n.Name)
		return
	}
	p.recent[n.Name] = kept
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
		pn := controller.NodeFromKube(n.Object, n.Lease, now, has)
		p.addRecent(&pn, n.Object.Status.LastHeartbeat, now)
		pnodes = append(pnodes, pn)
		from = append(from, n)
	}
	preq := placement.Request{
		Template:    placement.Intern(req.Template),
		Runtime:     placement.Intern(req.Runtime),
		MemoryBytes: req.MemoryBytes,
		MilliCPU:    req.MilliCPU,
		DiskBytes:   req.DiskBytes,
		Snapshot:    req.FromSnapshot,
		Devices:     req.Devices,
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
		return p.remember(byKey(req.IdempotencyKey, feasible), preq, req.IdempotencyKey, now), nil
	}
	return p.remember(from[d.Index], preq, "", now), nil
}

// remember records a placement on n until n's report counts it.
func (p *FleetPlacer) remember(n Node, req placement.Request, key string, now time.Time) Node {
	p.mu.Lock()
	defer p.mu.Unlock()
	if key != "" && slices.ContainsFunc(p.recent[n.Name], func(pl placed) bool { return pl.key == key }) {
		return n
	}
	p.recent[n.Name] = append(p.recent[n.Name], placed{at: now, req: req, key: key})
	return n
}
