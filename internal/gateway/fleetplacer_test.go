package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	warrenv1 "github.com/warrenhq/warren/apis/warren/v1alpha1"
)

// placerNode is a Ready node with a live Lease, the template bb, the
// native runtime, 8 GiB of memory and used GiB of it in use.
func placerNode(name string, usedGiB int64, mutate ...func(*warrenv1.WarrenNode)) Node {
	now := time.Now()
	secs := int32(15)
	wn := &warrenv1.WarrenNode{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: warrenv1.WarrenNodeStatus{
			Endpoint:   "http://" + name,
			Templates:  []string{"bb"},
			Runtimes:   []string{"native"},
			Capacity:   warrenv1.NodeResources{Memory: resource.NewQuantity(8<<30, resource.BinarySI), Sandboxes: 100},
			Used:       warrenv1.NodeResources{Memory: resource.NewQuantity(usedGiB<<30, resource.BinarySI)},
			Conditions: []metav1.Condition{{Type: warrenv1.NodeReady, Status: metav1.ConditionTrue, Reason: "Serving", LastTransitionTime: metav1.NewTime(now)}},
		},
	}
	for _, m := range mutate {
		m(wn)
	}
	lease := &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{LeaseDurationSeconds: &secs, RenewTime: &metav1.MicroTime{Time: now}}}
	return nodeOf(wn, lease, now)
}

func TestFleetPlacer(t *testing.T) {
	ctx := context.Background()
	p := NewFleetPlacer(3)

	// The emptier node wins among equals in everything else.
	nodes := []Node{placerNode("busy", 6), placerNode("idle", 1)}
	if n, err := p.Place(ctx, PlaceRequest{Template: "bb"}, nodes); err != nil || n.Name != "idle" {
		t.Fatalf("Place = %s, %v; want idle", n.Name, err)
	}
	// A burst placed before the nodes report again does not pile onto
	// one: the placer counts its own placements until their reports do.
	burst := NewFleetPlacer(3)
	equal := []Node{placerNode("a", 2), placerNode("b", 2)}
	got := map[string]int{}
	for range 10 {
		n, err := burst.Place(ctx, PlaceRequest{Template: "bb", MemoryBytes: 512 << 20}, equal)
		if err != nil {
			t.Fatal(err)
		}
		got[n.Name]++
	}
	if got["a"] < 4 || got["b"] < 4 {
		t.Errorf("a burst of 10 creates on two equal nodes went %v, want them spread", got)
	}
	p = NewFleetPlacer(3)

	// The node holding the snapshot wins over free room; drained, it is
	// passed over.
	withSnap := []Node{placerNode("busy", 6), placerNode("idle", 1)}
	withSnap[0].HoldsSnapshot = true
	if n, err := p.Place(ctx, PlaceRequest{Template: "snap1", FromSnapshot: "snap1"}, withSnap); err != nil || n.Name != "busy" {
		t.Errorf("create from a snapshot placed on %s, %v; want its holder busy", n.Name, err)
	}
	drained := []Node{placerNode("busy", 6, func(wn *warrenv1.WarrenNode) { wn.Spec.Unschedulable = true }), placerNode("idle", 1)}
	drained[0].HoldsSnapshot = true
	if n, err := p.Place(ctx, PlaceRequest{Template: "snap1", FromSnapshot: "snap1"}, drained); err != nil || n.Name != "idle" {
		t.Errorf("create from a drained holder's snapshot placed on %s, %v; want idle", n.Name, err)
	}

	// One idempotency key, one node, whatever the load says; keys spread.
	many := []Node{placerNode("a", 1), placerNode("b", 2), placerNode("c", 3), placerNode("d", 4)}
	seen := map[string]bool{}
	for i := range 40 {
		key := fmt.Sprintf("team/key-%d", i)
		first, err := p.Place(ctx, PlaceRequest{Template: "bb", IdempotencyKey: key}, many)
		if err != nil {
			t.Fatal(err)
		}
		for range 5 {
			if again, _ := p.Place(ctx, PlaceRequest{Template: "bb", IdempotencyKey: key}, many); again.Name != first.Name {
				t.Fatalf("key %s placed on %s then %s", key, first.Name, again.Name)
			}
		}
		seen[first.Name] = true
	}
	if len(seen) < 3 {
		t.Errorf("40 keys went to %v: want them spread", seen)
	}

	// Nothing Ready: the fleet is unavailable (503); all full: 429.
	notReady := []Node{placerNode("x", 0, func(wn *warrenv1.WarrenNode) { wn.Status.Conditions[0].Status = metav1.ConditionFalse })}
	_, err := p.Place(ctx, PlaceRequest{Template: "bb"}, notReady)
	if !errors.Is(err, errNoNode) || statusOf(err) != http.StatusServiceUnavailable {
		t.Errorf("no Ready node: %v (status %d), want 503", err, statusOf(err))
	}
	_, err = p.Place(ctx, PlaceRequest{Template: "bb", MemoryBytes: 4 << 30}, []Node{placerNode("full", 6)})
	if statusOf(err) != http.StatusTooManyRequests {
		t.Errorf("no room: %v (status %d), want 429", err, statusOf(err))
	}
	_, err = p.Place(ctx, PlaceRequest{Template: "nowhere"}, nodes)
	if statusOf(err) != http.StatusServiceUnavailable {
		t.Errorf("a template no node has (and no snapshot): %v (status %d), want 503", err, statusOf(err))
	}
}
