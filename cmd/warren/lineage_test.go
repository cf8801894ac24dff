package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/client"
)

// testLineage is a family with every kind of edge: turns, a named
// snapshot with two forks, a deleted turn, a rollback, a promote, and a
// snapshot whose sandbox is not in the family. Nodes are out of order on
// purpose: the tree sorts by time.
func testLineage() client.Lineage {
	t0 := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	at := func(min int) time.Time { return t0.Add(time.Duration(min) * time.Minute) }
	return client.Lineage{
		Family:   "fam",
		Template: "base",
		Nodes: []client.LineageNode{
			{ID: "sn3", Type: "snapshot", State: "ready", Kind: "implicit", CreatedAt: at(8)},
			{ID: "sb1", Type: "sandbox", State: "running", Head: "sn3", CreatedAt: at(0)},
			{ID: "sn2", Type: "snapshot", State: "ready", Kind: "named", Name: "before", CreatedAt: at(2)},
			{ID: "sn1", Type: "snapshot", State: "ready", Kind: "turn", Name: "turn-1", Turn: 1, CreatedAt: at(1)},
			{ID: "sb3", Type: "sandbox", State: "destroyed", Head: "sn1", CreatedAt: at(5)},
			{ID: "sb2", Type: "sandbox", State: "running", Head: "sn4", CreatedAt: at(3)},
			{ID: "sn4", Type: "snapshot", State: "ready", Kind: "turn", Turn: 1, CreatedAt: at(4)},
			{ID: "sn5", Type: "snapshot", State: "deleted", Kind: "turn", Name: "turn-2", Turn: 2, CreatedAt: at(6)},
			{ID: "sn9", Type: "snapshot", State: "ready", Kind: "named", Name: "stray", CreatedAt: at(9)},
			// The server adds a created-from edge's template as a node.
			{ID: "base", Type: "sandbox", State: "destroyed"},
		},
		Edges: []client.LineageEdge{
			{Kind: "created-from", From: "sb1", To: "base", At: at(0)},
			{Kind: "snapshot-of", From: "sn1", To: "sb1", At: at(1)},
			{Kind: "snapshot-of", From: "sn2", To: "sb1", At: at(2)},
			{Kind: "forked-from", From: "sb2", To: "sn2", At: at(3)},
			{Kind: "snapshot-of", From: "sn4", To: "sb2", At: at(4)},
			{Kind: "forked-from", From: "sb3", To: "sn2", At: at(5)},
			{Kind: "snapshot-of", From: "sn5", To: "sb1", At: at(6)},
			{Kind: "rolled-back-to", From: "sb1", To: "sn1", At: at(7)},
			{Kind: "promoted-from", From: "sb1", To: "sb2", At: at(8)},
			{Kind: "snapshot-of", From: "sn3", To: "sb1", At: at(8)},
			{Kind: "snapshot-of", From: "sn9", To: "gone", At: at(9)},
			{Kind: "something-new", From: "sb1", To: "sn9", At: at(9)},
		},
	}
}

const testLineageTree = `base (template)
├── sb1 (sandbox, running)
│   ├── sn1 turn-1
│   ├── sn2 before
│   │   ├── sb2 (sandbox, running)
│   │   │   └── * sn4 turn-1
│   │   └── sb3 (sandbox, destroyed, head sn1)
│   ├── sn5 turn-2 (deleted)
│   ├── ↺ rolled back to sn1
│   ├── * sn3 (implicit)
│   └── ⇐ promoted from sb2
└── sn9 stray
`

func TestLineageTree(t *testing.T) {
	if got := lineageTree(testLineage()); got != testLineageTree {
		t.Fatalf("tree:\n%s\nwant:\n%s", got, testLineageTree)
	}
}

func TestLineageTreeOddInputs(t *testing.T) {
	if got, want := lineageTree(client.Lineage{}), "(no template) (template)\n"; got != want {
		t.Errorf("empty lineage: %q, want %q", got, want)
	}
	// A cycle (a sandbox forked from its own snapshot) must neither loop nor
	// lose its nodes.
	cyc := client.Lineage{
		Template: "base",
		Nodes:    []client.LineageNode{{ID: "sbx", Type: "sandbox", State: "running"}, {ID: "snx", Type: "snapshot", State: "ready"}},
		Edges: []client.LineageEdge{
			{Kind: "snapshot-of", From: "snx", To: "sbx"},
			{Kind: "forked-from", From: "sbx", To: "snx"},
		},
	}
	want := "base (template)\n└── sbx (sandbox, running)\n    └── snx (unnamed)\n"
	if got := lineageTree(cyc); got != want {
		t.Errorf("cycle:\n%s\nwant:\n%s", got, want)
	}
}

func TestCLILineage(t *testing.T) {
	f, env := newSnapFake(t)
	cli(t, env, "", "sandbox", "create").must(t, 0)
	f.mu.Lock()
	f.lineage = testLineage()
	f.mu.Unlock()

	r := cli(t, env, "", "lineage", "sb1").must(t, 0)
	if r.stdout != testLineageTree {
		t.Fatalf("lineage printed:\n%s", r.stdout)
	}
	r = cli(t, env, "", "--json", "lineage", "sb1").must(t, 0)
	var l client.Lineage
	if err := json.Unmarshal([]byte(r.stdout), &l); err != nil || l.Family != "fam" || len(l.Edges) != 12 {
		t.Fatalf("lineage --json printed %q (%v)", r.stdout, err)
	}
	r = cli(t, env, "", "lineage", "nope").must(t, 1)
	if !strings.Contains(r.stderr, "sandbox nope not found") {
		t.Fatalf("stderr %q", r.stderr)
	}
}
