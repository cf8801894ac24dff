package gateway

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"

	"github.com/warrenhq/warren/internal/errdefs"
)

// PlaceRequest is what a create asks of the node that will run it.
type PlaceRequest struct {
	Template string
	Runtime  string
	// FromSnapshot is set when the create starts from a snapshot (for
	// placements that prefer the node holding it).
	FromSnapshot string
	MemoryBytes  int64
	MilliCPU     int64
	DiskBytes    int64
	// IdempotencyKey is "<team>/<Idempotency-Key>" of a create that has
	// one: a retry must reach the node of the first attempt, which alone
	// knows the key, so placement picks by it rather than by load.
	IdempotencyKey string
	// Team is the caller's: a snapshot copied for the create is recorded
	// under it on the chosen node.
	Team string
	// Devices the create asks for (CDI names).
	Devices []string
}

// Placer chooses the node of a create among the fleet's nodes (Ready or
// not: the choice of which count is the placer's). internal/placement's
// filter/score/best-of-K plugs in here.
type Placer interface {
	Place(ctx context.Context, req PlaceRequest, nodes []Node) (Node, error)
}

// MostFreeMemory is the simplest Placer: among Ready, schedulable nodes
// that have the template (when any node has it) and support the runtime,
// the one with the most free memory; ties go to the fewest sandboxes,
// then the name. A create with an idempotency key goes to the eligible
// node that key hashes highest with (rendezvous hashing): the same node on
// every retry while the eligible nodes stay the same.
type MostFreeMemory struct{}

var _ Placer = MostFreeMemory{}

func (MostFreeMemory) Place(_ context.Context, req PlaceRequest, nodes []Node) (Node, error) {
	cands := eligible(req, nodes)
	if len(cands) == 0 {
		return Node{}, noNodeError(req, nodes)
	}
	if req.IdempotencyKey != "" {
		return byKey(req.IdempotencyKey, cands), nil
	}
	best := cands[0]
	for _, n := range cands[1:] {
		if n.FreeMemory > best.FreeMemory ||
			(n.FreeMemory == best.FreeMemory && (n.Sandboxes < best.Sandboxes ||
				(n.Sandboxes == best.Sandboxes && n.Name < best.Name))) {
			best = n
		}
	}
	return best, nil
}

// byKey is the node key hashes highest with.
func byKey(key string, nodes []Node) Node {
	var best Node
	var top uint64
	for i, n := range nodes {
		h := fnv.New64a()
		_, _ = h.Write([]byte(key + "\x00" + n.Name))
		if v := h.Sum64(); i == 0 || v > top {
			best, top = n, v
		}
	}
	return best
}

// eligible keeps the nodes a create may go to. A template no node lists
// (a snapshot id, or nodes that do not report templates) filters nothing:
// the chosen node answers for it.
func eligible(req PlaceRequest, nodes []Node) []Node {
	var ok []Node
	for _, n := range nodes {
		if n.Ready && !n.Unschedulable {
			ok = append(ok, n)
		}
	}
	if req.Template != "" && slices.ContainsFunc(ok, func(n Node) bool { return n.HasTemplate(req.Template) }) {
		ok = slices.DeleteFunc(ok, func(n Node) bool { return !n.HasTemplate(req.Template) })
	}
	if req.Runtime != "" {
		ok = slices.DeleteFunc(ok, func(n Node) bool {
			return len(n.Runtimes) > 0 && !slices.Contains(n.Runtimes, req.Runtime)
		})
	}
	if req.MemoryBytes > 0 {
		ok = slices.DeleteFunc(ok, func(n Node) bool { return n.FreeMemory >= 0 && n.FreeMemory < req.MemoryBytes })
	}
	return ok
}

// noNodeError explains an empty choice: no Ready node at all is
// unavailable (503); Ready nodes that cannot take this create is
// exhaustion (429, as a full node answers).
func noNodeError(req PlaceRequest, nodes []Node) error {
	if len(readyNodes(nodes)) == 0 {
		return fmt.Errorf("no warren node is Ready (%d known): %w", len(nodes), errNoNode)
	}
	return fmt.Errorf("no Ready, schedulable node can take this sandbox (template %q, runtime %q, %d MiB): %w",
		req.Template, req.Runtime, req.MemoryBytes>>20, errdefs.ErrResourceExhausted)
}
