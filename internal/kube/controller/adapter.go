package controller

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	warrenv1 "github.com/warrenhq/warren/apis/warren/v1alpha1"
	"github.com/warrenhq/warren/internal/kube/fleet"
	"github.com/warrenhq/warren/internal/placement"
)

// LeaseExpiry is when a node's Lease lapses: its last renewal plus its
// duration. ok is false for a Lease that was never renewed or has no
// duration (nothing to measure from).
func LeaseExpiry(lease *coordinationv1.Lease) (expiry time.Time, ok bool) {
	if lease == nil || lease.Spec.LeaseDurationSeconds == nil {
		return time.Time{}, false
	}
	renewed := lease.Spec.RenewTime
	if renewed == nil {
		renewed = lease.Spec.AcquireTime
	}
	if renewed == nil {
		return time.Time{}, false
	}
	return renewed.Add(time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second), true
}

// NodeFromKube is what placement knows of a WarrenNode: its status, its
// drain switch, and whether its Lease (nil: none) is live at now.
// hasSnapshot says which snapshots it holds (nil: none known).
func NodeFromKube(wn *warrenv1.WarrenNode, lease *coordinationv1.Lease, now time.Time, hasSnapshot func(string) bool) placement.Node {
	expiry, ok := LeaseExpiry(lease)
	st := &wn.Status
	return placement.Node{
		Name:          wn.Name,
		Ready:         meta.IsStatusConditionTrue(st.Conditions, warrenv1.NodeReady),
		LeaseLive:     ok && now.Before(expiry),
		Unschedulable: fleet.Unschedulable(wn),
		Runtimes:      interned(st.Runtimes),
		Templates:     interned(st.Templates),
		Devices:       st.Devices,
		Capacity:      resources(st.Capacity),
		Used:          resources(st.Used),
		HasSnapshot:   hasSnapshot,
	}
}

// RequestFromSandbox is what placement is asked for a Sandbox object. A
// limit left out asks nothing of that resource (the node's default applies,
// which placement cannot know); the sandbox still counts one.
func RequestFromSandbox(sb *warrenv1.Sandbox) placement.Request {
	req := placement.Request{
		Template: sb.Spec.Template,
		Runtime:  sb.Spec.Runtime,
		Snapshot: sb.Spec.FromSnapshot,
	}
	if l := sb.Spec.Limits; l != nil {
		req.MemoryBytes = value(l.Memory)
		req.MilliCPU = milli(l.CPU)
		req.DiskBytes = value(l.Disk)
	}
	return req
}

// Fleet is placement's view of the fleet from its objects (as listed, in
// one namespace): each WarrenNode with its Lease; to each node's reported
// use are added the sandboxes placed on it that it has not taken yet (its
// report does not count them), and the snapshots it holds are those its
// Sandbox objects were made from or last saved to.
func Fleet(wns []warrenv1.WarrenNode, leases []coordinationv1.Lease, sbs []warrenv1.Sandbox, now time.Time) []placement.Node {
	byName := make(map[string]*coordinationv1.Lease, len(leases))
	for i := range leases {
		byName[leases[i].Name] = &leases[i]
	}
	pending := map[string]placement.Resources{}
	snapshots := map[string]map[string]struct{}{}
	for i := range sbs {
		sb := &sbs[i]
		if sb.Spec.NodeName != "" && sb.Status.SandboxID == "" {
			r := pending[sb.Spec.NodeName]
			add(&r, request(RequestFromSandbox(sb)))
			pending[sb.Spec.NodeName] = r
		}
		node := sb.Status.Node
		for _, id := range []string{sb.Status.LastSnapshot, sb.Spec.FromSnapshot} {
			if node == "" || id == "" {
				continue
			}
			if snapshots[node] == nil {
				snapshots[node] = map[string]struct{}{}
			}
			snapshots[node][id] = struct{}{}
		}
	}
	nodes := make([]placement.Node, len(wns))
	for i := range wns {
		wn := &wns[i]
		var has func(string) bool
		if held := snapshots[wn.Name]; held != nil {
			has = func(id string) bool { _, ok := held[id]; return ok }
		}
		nodes[i] = NodeFromKube(wn, byName[fleet.LeaseName(wn.Name)], now, has)
		add(&nodes[i].Used, pending[wn.Name])
	}
	return nodes
}

// request is what a placed sandbox takes of its node.
func request(r placement.Request) placement.Resources {
	return placement.Resources{MemoryBytes: r.MemoryBytes, MilliCPU: r.MilliCPU, DiskBytes: r.DiskBytes, Sandboxes: 1}
}

func add(to *placement.Resources, r placement.Resources) {
	to.MemoryBytes += r.MemoryBytes
	to.MilliCPU += r.MilliCPU
	to.DiskBytes += r.DiskBytes
	to.Sandboxes += r.Sandboxes
}

// resources converts a WarrenNode's quantities.
func resources(r warrenv1.NodeResources) placement.Resources {
	return placement.Resources{
		MemoryBytes: value(r.Memory),
		MilliCPU:    milli(r.CPU),
		DiskBytes:   value(r.Disk),
		Sandboxes:   int64(r.Sandboxes),
	}
}

func value(q *resource.Quantity) int64 {
	if q == nil {
		return 0
	}
	return q.Value()
}

func milli(q *resource.Quantity) int64 {
	if q == nil {
		return 0
	}
	return q.MilliValue()
}

// interned copies names as placement.Intern's canonical strings, which
// placement compares by pointer.
func interned(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = placement.Intern(n)
	}
	return out
}

// condition is a condition of the given type, status, reason and message,
// for meta.SetStatusCondition.
func condition(typ string, status metav1.ConditionStatus, reason, msg string, generation int64) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: generation}
}
