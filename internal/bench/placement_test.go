package bench

import "testing"

// TestRunPlacement: every decision is counted, creates from a snapshot land
// on its holder, and sizes that make no sense are refused.
func TestRunPlacement(t *testing.T) {
	rep, err := RunPlacement(PlacementOptions{Nodes: []int{20, 200}, Decisions: 400, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Sample != 3 || len(rep.Fleets) != 2 {
		t.Fatalf("report %+v", rep)
	}
	for _, f := range rep.Fleets {
		if f.Placed+f.NoNode != 400 || f.Decision.N != 400 || f.Placed == 0 || f.Local == 0 {
			t.Fatalf("fleet of %d: %+v", f.Nodes, f)
		}
	}
	if _, err := RunPlacement(PlacementOptions{Nodes: []int{0}, Decisions: 1}); err == nil {
		t.Fatal("a fleet of 0 nodes was accepted")
	}
	if _, err := RunPlacement(PlacementOptions{Nodes: []int{10}}); err == nil {
		t.Fatal("0 decisions were accepted")
	}
}
