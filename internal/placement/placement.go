// Package placement chooses the node a new sandbox runs on: filter the nodes
// that can take it, score a few of them, take the best. It is the one
// placement of the fleet — the gateway's creates and the controller's
// unplaced Sandbox objects both call it — and it is pure: its own Node and
// Request types, no clock, no I/O, no Kubernetes, randomness only from the
// caller's source, so a decision is reproducible and cheap enough to make on
// every create (≈ tens of µs for 1,000 nodes).
//
// Best of K sampled nodes (E2B's and Sparrow's "power of K choices") instead
// of scoring every node: scoring all of them sends every create of a burst to
// the one best node until its next status report, while a few random
// candidates spread a burst and still avoid the worst nodes.
package placement

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"unique"
)

// Resources is an amount of each resource placement weighs. A capacity of 0
// means the node does not report that resource: it neither filters nor
// scores on it.
type Resources struct {
	MemoryBytes int64
	MilliCPU    int64
	DiskBytes   int64
	Sandboxes   int64
}

// Node is what placement knows of one node.
type Node struct {
	Name string
	// Ready is the node's own Ready condition.
	Ready bool
	// LeaseLive: its lease was renewed within its duration. A Ready node
	// whose lease lapsed stopped reporting, so its Ready is stale.
	LeaseLive bool
	// Unschedulable is the drain switch: the node keeps what it runs and
	// takes nothing new.
	Unschedulable bool
	Runtimes      []string
	Templates     []string
	// Devices a new sandbox can be given there now (CDI names).
	Devices  []string
	Capacity Resources
	Used     Resources
	// HasSnapshot says whether the node holds a snapshot; nil: none known.
	HasSnapshot func(id string) bool
}

// Intern returns the canonical copy of a template or runtime name. Nodes
// built with interned names are filtered several times faster (see Choose).
func Intern(name string) string { return unique.Make(name).Value() }

// SnapshotSet is a HasSnapshot over a fixed set of ids.
func SnapshotSet(ids ...string) func(string) bool {
	set := make(map[string]struct{}, len(ids))
	for _, id := range ids {
		set[id] = struct{}{}
	}
	return func(id string) bool { _, ok := set[id]; return ok }
}

// Request is the sandbox to place.
type Request struct {
	// Template must be built on the node; empty: the node's default, which
	// every node has.
	Template string
	// Runtime must be one the node runs; empty: the node's default.
	Runtime string
	// Memory, CPU and disk the sandbox is given; a sandbox always counts
	// one towards the node's sandboxes.
	MemoryBytes int64
	MilliCPU    int64
	DiskBytes   int64
	// Snapshot the sandbox starts from (a fork, a create from a snapshot,
	// a resume): a node holding it starts it without a transfer.
	Snapshot string
	// Devices the sandbox asks for (CDI names): the node must have each
	// free.
	Devices []string
}

// Weights weigh the parts of a node's score.
type Weights struct {
	// Free: share of the node's capacity left after placing (0..1).
	Free float64
	// Spread: 1/(1+sandboxes the node runs), so an empty node wins a tie.
	Spread float64
	// Locality is added when the node holds Request.Snapshot; larger than
	// Free+Spread so that locality wins over any amount of free room.
	Locality float64
}

// DefaultSample is how many feasible nodes a decision scores.
const DefaultSample = 3

// DefaultWeights favour locality strongly, then free room, then spread.
var DefaultWeights = Weights{Free: 1, Spread: 0.5, Locality: 10}

// Policy is a placement configuration.
type Policy struct {
	// Sample is K, the feasible nodes scored per decision (besides the
	// ones holding the wanted snapshot, which are always scored); 0 or
	// less: DefaultSample.
	Sample int
	// Weights of the score; zero: DefaultWeights.
	Weights Weights
}

// Default is the policy of Choose.
var Default = Policy{Sample: DefaultSample, Weights: DefaultWeights}

// Choose places req on one of nodes with the Default policy.
func Choose(nodes []Node, req Request, rng *rand.Rand) (Decision, error) {
	return Default.Choose(nodes, req, rng)
}

// Score is a node's score and its parts (the weighted sum of which is
// Total), what a Decision gives as its reason.
type Score struct {
	Free     float64 `json:"free"`
	Spread   float64 `json:"spread"`
	Locality float64 `json:"locality"`
	Total    float64 `json:"total"`
}

// Candidate is one node scored by a decision.
type Candidate struct {
	Node  string `json:"node"`
	Score Score  `json:"score"`
}

// Decision is where a sandbox goes and why.
type Decision struct {
	// Node is the chosen node's name; Index its position in the nodes
	// passed to Choose.
	Node  string `json:"node"`
	Index int    `json:"-"`
	Score Score  `json:"score"`
	// HasSnapshot: the chosen node holds Request.Snapshot (false when the
	// request names none, or when no node holding it could take it: the
	// snapshot must then be transferred).
	HasSnapshot bool `json:"hasSnapshot"`
	// Candidates are the nodes scored, best first.
	Candidates []Candidate `json:"candidates"`
	// Feasible is how many nodes passed the filter, Filtered how many each
	// reason removed.
	Feasible int            `json:"feasible"`
	Filtered map[Reason]int `json:"filtered,omitempty"`
}

// String says the decision in one line, for logs and conditions.
func (d Decision) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "node %s (score %.3f: free %.3f, spread %.3f, locality %.0f) best of %d of %d feasible",
		d.Node, d.Score.Total, d.Score.Free, d.Score.Spread, d.Score.Locality, len(d.Candidates), d.Feasible)
	if n := sumFiltered(d.Filtered); n > 0 {
		fmt.Fprintf(&b, "; %d filtered: %s", n, formatFiltered(d.Filtered))
	}
	return b.String()
}

// Choose places req on one of nodes: the best-scoring of K feasible nodes
// sampled with rng (reservoir sampling, so a decision allocates nothing in
// proportion to the fleet), together with every feasible node holding the
// wanted snapshot. Equal scores go to the earlier name, so the decision depends
// only on the nodes, the request and rng's sequence.
func (p Policy) Choose(nodes []Node, req Request, rng *rand.Rand) (Decision, error) {
	// The filter compares the request's names with every node's: when both
	// are interned (Intern) the comparison stops at the pointer instead of
	// reading each node's copy from memory — most of a 10,000-node decision.
	req.Template, req.Runtime = Intern(req.Template), Intern(req.Runtime)
	var filtered counts
	k := p.sample()
	sampled := make([]int, 0, k) // a reservoir: no list of every feasible node
	var local []int
	others := 0
	for i := range nodes {
		if r := check(&nodes[i], &req); r != 0 {
			filtered[r]++
			continue
		}
		if req.Snapshot != "" && nodes[i].HasSnapshot != nil && nodes[i].HasSnapshot(req.Snapshot) {
			local = append(local, i)
			continue
		}
		others++
		if len(sampled) < k {
			sampled = append(sampled, i)
		} else if j := rng.IntN(others); j < k {
			sampled[j] = i
		}
	}
	total := others + len(local)
	if total == 0 {
		return Decision{}, &NoNodeError{Nodes: len(nodes), Filtered: filtered.reasons(), Request: req}
	}
	candidates := slices.Concat(local, sampled)
	d := Decision{Feasible: total, Filtered: filtered.reasons(), Candidates: make([]Candidate, 0, len(candidates))}
	best := -1
	for _, i := range candidates {
		s := p.score(&nodes[i], &req, slices.Contains(local, i))
		d.Candidates = append(d.Candidates, Candidate{Node: nodes[i].Name, Score: s})
		if best < 0 || better(s, nodes[i].Name, d.Score, nodes[best].Name) {
			best, d.Score = i, s
		}
	}
	slices.SortStableFunc(d.Candidates, func(a, b Candidate) int {
		if c := cmp.Compare(b.Score.Total, a.Score.Total); c != 0 {
			return c
		}
		return strings.Compare(a.Node, b.Node)
	})
	d.Node, d.Index, d.HasSnapshot = nodes[best].Name, best, slices.Contains(local, best)
	return d, nil
}

// better says whether score a of node na beats score b of node nb.
func better(a Score, na string, b Score, nb string) bool {
	if a.Total != b.Total {
		return a.Total > b.Total
	}
	return na < nb
}

func (p Policy) sample() int {
	if p.Sample <= 0 {
		return DefaultSample
	}
	return p.Sample
}

// score weighs a feasible node for req.
func (p Policy) score(n *Node, req *Request, local bool) Score {
	w := p.Weights
	if w == (Weights{}) {
		w = DefaultWeights
	}
	s := Score{
		Free:   freeAfter(n, req),
		Spread: 1 / float64(1+max(n.Used.Sandboxes, 0)),
	}
	if local {
		s.Locality = 1
	}
	s.Total = w.Free*s.Free + w.Spread*s.Spread + w.Locality*s.Locality
	return s
}

// freeAfter is the mean share of each reported resource left once req is
// placed on n (1 when the node reports none).
func freeAfter(n *Node, req *Request) float64 {
	var sum float64
	var count int
	add := func(capacity, used, asked int64) {
		if capacity <= 0 {
			return
		}
		// At least 0: CPU is overcommitted, and a node reserving three
		// times its CPUs is no worse placed than one reserving twice.
		sum += max(float64(capacity-used-asked)/float64(capacity), 0)
		count++
	}
	add(n.Capacity.MemoryBytes, n.Used.MemoryBytes, req.MemoryBytes)
	add(n.Capacity.MilliCPU, n.Used.MilliCPU, req.MilliCPU)
	add(n.Capacity.DiskBytes, n.Used.DiskBytes, req.DiskBytes)
	add(n.Capacity.Sandboxes, n.Used.Sandboxes, 1)
	if count == 0 {
		return 1
	}
	return sum / float64(count)
}
