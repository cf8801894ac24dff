package controller

import (
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	warrenv1 "github.com/warrenhq/warren/apis/warren/v1alpha1"
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
		Unschedulable: wn.Spec.Unschedulable,
		Runtimes:      interned(st.Runtimes),
		Templates:     interned(st.Templates),
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
