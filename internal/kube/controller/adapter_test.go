package controller_test

import (
	"reflect"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	warrenv1 "github.com/warrenhq/warren/apis/warren/v1alpha1"
	"github.com/warrenhq/warren/internal/kube/controller"
	"github.com/warrenhq/warren/internal/kube/fleet"
	"github.com/warrenhq/warren/internal/placement"
)

func quantity(s string) *resource.Quantity { return ptr.To(resource.MustParse(s)) }

// TestLeaseExpiry: renewal (else acquisition) plus the duration; a Lease
// missing either has none.
func TestLeaseExpiry(t *testing.T) {
	at := time.Date(2026, 11, 27, 21, 0, 0, 0, time.UTC)
	l := &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{
		LeaseDurationSeconds: ptr.To(int32(15)),
		AcquireTime:          &metav1.MicroTime{Time: at.Add(-time.Hour)},
		RenewTime:            &metav1.MicroTime{Time: at},
	}}
	if e, ok := controller.LeaseExpiry(l); !ok || !e.Equal(at.Add(15*time.Second)) {
		t.Fatalf("expiry %v %v", e, ok)
	}
	l.Spec.RenewTime = nil
	if e, ok := controller.LeaseExpiry(l); !ok || !e.Equal(at.Add(-time.Hour+15*time.Second)) {
		t.Fatalf("expiry from acquisition %v %v", e, ok)
	}
	l.Spec.AcquireTime = nil
	if _, ok := controller.LeaseExpiry(l); ok {
		t.Fatal("a Lease never renewed has an expiry")
	}
	if _, ok := controller.LeaseExpiry(nil); ok {
		t.Fatal("no Lease has an expiry")
	}
}

// TestNodeFromKube: status, drain switch, Lease liveness and quantities
// become placement's node.
func TestNodeFromKube(t *testing.T) {
	now := time.Now()
	wn := &warrenv1.WarrenNode{
		ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Spec:       warrenv1.WarrenNodeSpec{Unschedulable: true},
		Status: warrenv1.WarrenNodeStatus{
			Runtimes: []string{"native"}, Templates: []string{"base"},
			Capacity:   warrenv1.NodeResources{Memory: quantity("16Gi"), CPU: quantity("8"), Disk: quantity("100Gi"), Sandboxes: 50},
			Used:       warrenv1.NodeResources{Memory: quantity("1Gi"), CPU: quantity("1500m"), Sandboxes: 2},
			Conditions: []metav1.Condition{{Type: warrenv1.NodeReady, Status: metav1.ConditionTrue}},
		},
	}
	lease := &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{
		LeaseDurationSeconds: ptr.To(int32(15)), RenewTime: &metav1.MicroTime{Time: now.Add(-10 * time.Second)},
	}}
	n := controller.NodeFromKube(wn, lease, now, placement.SnapshotSet("s1"))
	if !n.Ready || !n.LeaseLive || !n.Unschedulable || n.Name != "n1" || !n.HasSnapshot("s1") {
		t.Fatalf("node %+v", n)
	}
	want := placement.Resources{MemoryBytes: 16 << 30, MilliCPU: 8000, DiskBytes: 100 << 30, Sandboxes: 50}
	if n.Capacity != want {
		t.Fatalf("capacity %+v, want %+v", n.Capacity, want)
	}
	if want := (placement.Resources{MemoryBytes: 1 << 30, MilliCPU: 1500, Sandboxes: 2}); n.Used != want {
		t.Fatalf("used %+v, want %+v", n.Used, want)
	}
	if n := controller.NodeFromKube(wn, lease, now.Add(6*time.Second), nil); n.LeaseLive {
		t.Fatal("a lapsed Lease is live")
	}
	if n := controller.NodeFromKube(wn, nil, now, nil); n.LeaseLive {
		t.Fatal("a node without a Lease is live")
	}
	wn.Status.Conditions[0].Status = metav1.ConditionFalse
	if n := controller.NodeFromKube(wn, lease, now, nil); n.Ready {
		t.Fatal("Ready=False read as ready")
	}
}

// TestRequestFromSandbox: the spec's template, runtime, snapshot and limits.
func TestRequestFromSandbox(t *testing.T) {
	sb := &warrenv1.Sandbox{Spec: warrenv1.SandboxSpec{
		FromSnapshot: "snap9", Runtime: "gvisor",
		Limits: &warrenv1.SandboxLimits{Memory: quantity("512Mi"), CPU: quantity("500m"), Disk: quantity("2Gi")},
	}}
	want := placement.Request{Runtime: "gvisor", Snapshot: "snap9", MemoryBytes: 512 << 20, MilliCPU: 500, DiskBytes: 2 << 30}
	if got := controller.RequestFromSandbox(sb); !reflect.DeepEqual(got, want) {
		t.Fatalf("request %+v, want %+v", got, want)
	}
	if got := controller.RequestFromSandbox(&warrenv1.Sandbox{Spec: warrenv1.SandboxSpec{Template: "base"}}); !reflect.DeepEqual(got, placement.Request{Template: "base"}) {
		t.Fatalf("request %+v", got)
	}
}

// TestFleet: each node gets its own Lease, the sandboxes placed on it that
// it has not taken yet, and the snapshots its sandboxes name.
func TestFleet(t *testing.T) {
	now := time.Now()
	ready := []metav1.Condition{{Type: warrenv1.NodeReady, Status: metav1.ConditionTrue}}
	wns := []warrenv1.WarrenNode{
		{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Status: warrenv1.WarrenNodeStatus{Conditions: ready, Used: warrenv1.NodeResources{Sandboxes: 1}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Status: warrenv1.WarrenNodeStatus{Conditions: ready}},
	}
	leases := []coordinationv1.Lease{{
		ObjectMeta: metav1.ObjectMeta{Name: fleet.LeaseName("a")},
		Spec:       coordinationv1.LeaseSpec{LeaseDurationSeconds: ptr.To(int32(15)), RenewTime: &metav1.MicroTime{Time: now}},
	}}
	mem := &warrenv1.SandboxLimits{Memory: quantity("1Gi")}
	sbs := []warrenv1.Sandbox{
		// Placed on a, not taken yet: counted.
		{Spec: warrenv1.SandboxSpec{NodeName: "a", Limits: mem}},
		// Held by a: in its report already; names two snapshots.
		{Spec: warrenv1.SandboxSpec{NodeName: "a", FromSnapshot: "s1", Limits: mem},
			Status: warrenv1.SandboxStatus{Node: "a", SandboxID: "x", LastSnapshot: "s2"}},
		// Unplaced: nobody's.
		{Spec: warrenv1.SandboxSpec{Limits: mem}},
	}
	nodes := controller.Fleet(wns, leases, sbs, now)
	a, b := nodes[0], nodes[1]
	if !a.LeaseLive || b.LeaseLive {
		t.Fatalf("lease live: a %v, b %v", a.LeaseLive, b.LeaseLive)
	}
	if want := (placement.Resources{MemoryBytes: 1 << 30, Sandboxes: 2}); a.Used != want {
		t.Fatalf("a used %+v, want %+v", a.Used, want)
	}
	if b.Used != (placement.Resources{}) || b.HasSnapshot != nil {
		t.Fatalf("b %+v", b)
	}
	if !a.HasSnapshot("s1") || !a.HasSnapshot("s2") || a.HasSnapshot("s3") {
		t.Fatal("a's snapshots")
	}
}
