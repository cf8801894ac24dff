package gateway

import (
	"slices"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	warrenv1 "github.com/warrenhq/warren/apis/warren/v1alpha1"
	"github.com/warrenhq/warren/internal/kube/fleet"
)

// Node is what the gateway knows of one warren node: where to reach it and
// what placement weighs.
type Node struct {
	Name     string
	Endpoint string // the node's advertise URL, http://host:port
	// Ready: its WarrenNode says Ready, its Lease is live and it has an
	// endpoint. Only Ready nodes get requests.
	Ready         bool
	Unschedulable bool
	Templates     []string
	Runtimes      []string
	// Free memory in bytes (capacity - used); -1 when the node did not say.
	FreeMemory int64
	Sandboxes  int32
	// HoldsSnapshot: the node holds the snapshot a create starts from (set
	// for that create only, for placement's locality).
	HoldsSnapshot bool

	// The objects it was read from (Lease nil when there is none), for a
	// Placer that weighs more than the fields above (controller.NodeFromKube
	// turns them into placement's nodes). They are the watch cache's own:
	// read them, never write to them.
	Object *warrenv1.WarrenNode
	Lease  *coordinationv1.Lease
}

// HasTemplate reports whether the node holds template t.
func (n Node) HasTemplate(t string) bool { return slices.Contains(n.Templates, t) }

// nodeOf reads a WarrenNode and its Lease (nil when there is none) as of now.
func nodeOf(wn *warrenv1.WarrenNode, lease *coordinationv1.Lease, now time.Time) Node {
	st := wn.Status
	n := Node{
		Name:          wn.Name,
		Endpoint:      st.Endpoint,
		Unschedulable: fleet.Unschedulable(wn),
		Templates:     st.Templates,
		Runtimes:      st.Runtimes,
		FreeMemory:    -1,
		Sandboxes:     st.Used.Sandboxes,
		Object:        wn,
		Lease:         lease,
	}
	if st.Capacity.Memory != nil {
		used := int64(0)
		if st.Used.Memory != nil {
			used = st.Used.Memory.Value()
		}
		n.FreeMemory = max(st.Capacity.Memory.Value()-used, 0)
	}
	n.Ready = st.Endpoint != "" && leaseLive(lease, now) &&
		meta.IsStatusConditionPresentAndEqual(st.Conditions, warrenv1.NodeReady, metav1.ConditionTrue)
	return n
}

// leaseLive reports whether a node's Lease was renewed within its duration.
func leaseLive(l *coordinationv1.Lease, now time.Time) bool {
	if l == nil || l.Spec.LeaseDurationSeconds == nil {
		return false
	}
	renewed := l.Spec.RenewTime
	if renewed == nil {
		renewed = l.Spec.AcquireTime
	}
	if renewed == nil {
		return false
	}
	expiry := renewed.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second)
	return now.Before(expiry)
}

// readyNodes keeps the Ready nodes, in name order.
func readyNodes(all []Node) []Node {
	var out []Node
	for _, n := range all {
		if n.Ready {
			out = append(out, n)
		}
	}
	return out
}
