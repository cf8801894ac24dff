package placement_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/placement"
)

const gib = int64(1) << 30

// node is a ready, live node with room for anything the tests ask.
func node(name string) placement.Node {
	return placement.Node{
		Name: name, Ready: true, LeaseLive: true,
		Runtimes:  []string{"native", "gvisor"},
		Templates: []string{"base", "python"},
		Capacity:  placement.Resources{MemoryBytes: 16 * gib, MilliCPU: 8000, DiskBytes: 100 * gib, Sandboxes: 100},
	}
}

func rng(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed)) }

// TestFilterRules: each rule removes the node that breaks it, counted under
// its reason, and the node that breaks none is chosen.
func TestFilterRules(t *testing.T) {
	req := placement.Request{Template: "python", Runtime: "gvisor", MemoryBytes: 2 * gib, MilliCPU: 1000, DiskBytes: 10 * gib}
	cases := []struct {
		reason placement.Reason
		spoil  func(*placement.Node)
	}{
		{placement.NotReady, func(n *placement.Node) { n.Ready = false }},
		{placement.LeaseExpired, func(n *placement.Node) { n.LeaseLive = false }},
		{placement.Unschedulable, func(n *placement.Node) { n.Unschedulable = true }},
		{placement.RuntimeUnsupported, func(n *placement.Node) { n.Runtimes = []string{"native"} }},
		{placement.TemplateMissing, func(n *placement.Node) { n.Templates = []string{"base"} }},
		{placement.NoMemory, func(n *placement.Node) { n.Used.MemoryBytes = 15 * gib }},
		{placement.NoCPU, func(n *placement.Node) { n.Capacity.MilliCPU = 500 }},
		{placement.NoDisk, func(n *placement.Node) { n.Used.DiskBytes = 95 * gib }},
		{placement.SandboxesFull, func(n *placement.Node) { n.Used.Sandboxes = 100 }},
	}
	for _, c := range cases {
		t.Run(string(c.reason), func(t *testing.T) {
			bad, good := node("a-bad"), node("b-good")
			c.spoil(&bad)
			d, err := placement.Choose([]placement.Node{bad, good}, req, rng(1))
			if err != nil {
				t.Fatal(err)
			}
			if d.Node != "b-good" || d.Index != 1 || d.Feasible != 1 {
				t.Fatalf("chose %s (index %d, %d feasible), want b-good", d.Node, d.Index, d.Feasible)
			}
			if want := map[placement.Reason]int{c.reason: 1}; !reflect.DeepEqual(d.Filtered, want) {
				t.Fatalf("filtered %v, want %v", d.Filtered, want)
			}
		})
	}
}

// TestEmptyAsksFilterNothing: a request without template or runtime fits any
// live node, and a node that reports no capacity is not full.
func TestEmptyAsksFilterNothing(t *testing.T) {
	n := placement.Node{Name: "bare", Ready: true, LeaseLive: true}
	d, err := placement.Choose([]placement.Node{n}, placement.Request{MemoryBytes: gib}, rng(1))
	if err != nil || d.Node != "bare" {
		t.Fatalf("got %v, %v; want bare", d, err)
	}
	if d.Score.Free != 1 {
		t.Fatalf("free %v of a node reporting no capacity, want 1", d.Score.Free)
	}
}

// TestExactFit: a sandbox that fills a node exactly fits it.
func TestExactFit(t *testing.T) {
	n := node("a")
	n.Used = placement.Resources{MemoryBytes: 14 * gib, Sandboxes: 99}
	if _, err := placement.Choose([]placement.Node{n}, placement.Request{MemoryBytes: 2 * gib}, rng(1)); err != nil {
		t.Fatal(err)
	}
}

// TestNoNodeError: the error counts every reason and has the kind that says
// whether waiting may help.
func TestNoNodeError(t *testing.T) {
	notReady, full, noRuntime := node("a"), node("b"), node("c")
	notReady.Ready = false
	full.Used.Sandboxes = 100
	noRuntime.Runtimes = []string{"native"}
	req := placement.Request{Runtime: "gvisor", Template: "base"}

	_, err := placement.Choose([]placement.Node{notReady, full, noRuntime}, req, rng(1))
	var nn *placement.NoNodeError
	if !errors.As(err, &nn) || !errdefs.IsResourceExhausted(err) {
		t.Fatalf("got %v, want a NoNodeError of kind ResourceExhausted", err)
	}
	want := "no node can take the sandbox (template base, runtime gvisor); of its 3 nodes: 1 not ready, 1 runtime not supported, 1 at its sandbox limit"
	if err.Error() != want {
		t.Fatalf("message\n%s\nwant\n%s", err, want)
	}

	_, err = placement.Choose([]placement.Node{notReady, noRuntime}, req, rng(1))
	if !errdefs.IsUnavailable(err) || errdefs.IsResourceExhausted(err) {
		t.Fatalf("no node that could ever take it: got %v, want kind Unavailable", err)
	}
	_, err = placement.Choose(nil, req, rng(1))
	if !errdefs.IsUnavailable(err) || !strings.Contains(err.Error(), "no nodes") {
		t.Fatalf("empty fleet: got %v", err)
	}
}

// TestScoreFreeRoom: of two otherwise equal nodes the one with more room
// left wins; the score parts are reported.
func TestScoreFreeRoom(t *testing.T) {
	busy, idle := node("a"), node("b")
	busy.Used = placement.Resources{MemoryBytes: 12 * gib, MilliCPU: 6000, DiskBytes: 50 * gib, Sandboxes: 10}
	idle.Used = placement.Resources{MemoryBytes: 2 * gib, MilliCPU: 1000, DiskBytes: 10 * gib, Sandboxes: 10}
	d, err := placement.Choose([]placement.Node{busy, idle}, placement.Request{MemoryBytes: gib}, rng(1))
	if err != nil || d.Node != "b" {
		t.Fatalf("got %v, %v; want b", d, err)
	}
	if len(d.Candidates) != 2 || d.Candidates[0].Node != "b" || d.Candidates[0].Score.Free <= d.Candidates[1].Score.Free {
		t.Fatalf("candidates %+v: want b first with more free room", d.Candidates)
	}
	// (16-2-1)/16 memory, 7/8 CPU, 90/100 disk, 89/100 sandboxes.
	want := (13.0/16 + 7.0/8 + 0.9 + 0.89) / 4
	if diff := d.Score.Free - want; diff > 1e-9 || diff < -1e-9 {
		t.Fatalf("free %v, want %v", d.Score.Free, want)
	}
}

// TestScoreSpread: with capacity unreported (no free-room signal), the node
// running fewer sandboxes wins.
func TestScoreSpread(t *testing.T) {
	a := placement.Node{Name: "a", Ready: true, LeaseLive: true, Used: placement.Resources{Sandboxes: 3}}
	b := placement.Node{Name: "b", Ready: true, LeaseLive: true, Used: placement.Resources{Sandboxes: 1}}
	d, err := placement.Choose([]placement.Node{a, b}, placement.Request{}, rng(1))
	if err != nil || d.Node != "b" || d.Score.Spread != 0.5 {
		t.Fatalf("got %v, %v; want b with spread 0.5", d, err)
	}
}

// TestLocality: the node holding the snapshot wins over emptier nodes and
// is always among the candidates, however many nodes there are; when it
// cannot take the sandbox another node does, and the decision says the
// snapshot is not there.
func TestLocality(t *testing.T) {
	nodes := make([]placement.Node, 200)
	for i := range nodes {
		nodes[i] = node(fmt.Sprintf("n%03d", i))
	}
	holder := &nodes[137]
	holder.Used = placement.Resources{MemoryBytes: 15 * gib, MilliCPU: 7000, DiskBytes: 90 * gib, Sandboxes: 90}
	holder.HasSnapshot = placement.SnapshotSet("snap1", "snap2")
	req := placement.Request{Snapshot: "snap1", MemoryBytes: gib / 2}
	for seed := range uint64(50) {
		d, err := placement.Choose(nodes, req, rng(seed))
		if err != nil || d.Node != "n137" || !d.HasSnapshot || d.Score.Locality != 1 {
			t.Fatalf("seed %d: got %v, %v; want n137 for its snapshot", seed, d, err)
		}
		if len(d.Candidates) != placement.DefaultSample+1 {
			t.Fatalf("seed %d: %d candidates, want K+1", seed, len(d.Candidates))
		}
	}
	holder.Used.Sandboxes = 100
	d, err := placement.Choose(nodes, req, rng(1))
	if err != nil || d.Node == "n137" || d.HasSnapshot {
		t.Fatalf("full holder: got %v, %v; want another node without the snapshot", d, err)
	}
	d, err = placement.Choose(nodes, placement.Request{Snapshot: "other"}, rng(1))
	if err != nil || d.HasSnapshot || d.Score.Locality != 0 {
		t.Fatalf("unknown snapshot: got %v, %v", d, err)
	}
}

// TestBestOfK: K candidates are scored (all of them when fewer are
// feasible), the best of them wins, and K is configurable.
func TestBestOfK(t *testing.T) {
	nodes := make([]placement.Node, 50)
	for i := range nodes {
		nodes[i] = node(fmt.Sprintf("n%02d", i))
		nodes[i].Used.Sandboxes = int64(i) // n00 is the emptiest
	}
	for _, k := range []int{1, 3, 7} {
		p := placement.Policy{Sample: k, Weights: placement.DefaultWeights}
		d, err := p.Choose(nodes, placement.Request{}, rng(uint64(k)))
		if err != nil || len(d.Candidates) != k {
			t.Fatalf("K=%d: %d candidates, %v", k, len(d.Candidates), err)
		}
		if d.Node != d.Candidates[0].Node {
			t.Fatalf("K=%d: chose %s, best candidate %s", k, d.Node, d.Candidates[0].Node)
		}
		for _, c := range d.Candidates[1:] {
			if c.Score.Total > d.Score.Total {
				t.Fatalf("K=%d: candidate %v beats the choice %v", k, c, d.Score)
			}
		}
	}
	// Scoring all nodes finds the emptiest.
	d, _ := placement.Policy{Sample: len(nodes)}.Choose(nodes, placement.Request{}, rng(1))
	if d.Node != "n00" || len(d.Candidates) != len(nodes) {
		t.Fatalf("K=all: chose %s of %d candidates", d.Node, len(d.Candidates))
	}
}

// TestSpreadsABurst: sampling spreads creates over equal nodes instead of
// sending all of them to one.
func TestSpreadsABurst(t *testing.T) {
	nodes := []placement.Node{node("a"), node("b"), node("c"), node("d"), node("e"), node("f")}
	r := rng(7)
	seen := map[string]int{}
	for range 60 {
		d, err := placement.Policy{Sample: 2}.Choose(nodes, placement.Request{}, r)
		if err != nil {
			t.Fatal(err)
		}
		seen[d.Node]++
		nodes[d.Index].Used.Sandboxes++
	}
	for _, n := range nodes {
		if c := seen[n.Name]; c < 5 || c > 15 {
			t.Fatalf("node %s got %d of 60 creates: %v", n.Name, c, seen)
		}
	}
}

// TestDeterministic: the same rng seed gives the same decision; ties go to
// the earlier name.
func TestDeterministic(t *testing.T) {
	nodes := make([]placement.Node, 100)
	for i := range nodes {
		nodes[i] = node(fmt.Sprintf("n%02d", i))
		nodes[i].Used.Sandboxes = int64(i % 7)
	}
	for seed := range uint64(20) {
		a, _ := placement.Choose(nodes, placement.Request{}, rng(seed))
		b, _ := placement.Choose(nodes, placement.Request{}, rng(seed))
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("seed %d: %v then %v", seed, a, b)
		}
	}
	tie := []placement.Node{node("z"), node("y"), node("x")}
	d, _ := placement.Choose(tie, placement.Request{}, rng(1))
	if d.Node != "x" {
		t.Fatalf("tie went to %s, want x (the earliest name)", d.Node)
	}
	if !strings.HasPrefix(d.String(), "node x (score ") {
		t.Fatalf("String: %s", d)
	}
}
