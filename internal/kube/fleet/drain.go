package fleet

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	warrenv1 "github.com/warrenhq/warren/apis/warren/v1alpha1"
)

// DrainAnnotation on a Kubernetes Node says what its cordon means for the
// warren node on it: "true" moves its sandboxes off (a kubectl drain), "false"
// only keeps new ones away; absent, the gateway's --drain-on-cordon decides.
const DrainAnnotation = "warren.dev/drain"

// Conditions the gateway's controller writes on a WarrenNode from its
// Kubernetes Node: Cordoned while the Node is unschedulable (placement
// then avoids it as it does a WarrenNode with spec.unschedulable), Drained
// while its sandboxes are being moved off (False, reason Draining) and once
// they are (True) or some could not be (False, reason DrainIncomplete).
const (
	NodeCordoned = "Cordoned"
	NodeDrained  = "Drained"
)

// Unschedulable says whether placement keeps new sandboxes off wn: its own
// drain switch (warren node drain) or its Kubernetes Node's cordon.
func Unschedulable(wn *warrenv1.WarrenNode) bool {
	return wn.Spec.Unschedulable || meta.IsStatusConditionPresentAndEqual(wn.Status.Conditions, NodeCordoned, metav1.ConditionTrue)
}

// DrainItem is one sandbox of a node being drained.
type DrainItem struct {
	Object  string // the Sandbox object's name
	ID      string
	Phase   warrenv1.SandboxPhase
	Runtime string
}

// DrainList splits the Sandbox objects of node into those a drain moves and
// those it leaves (creating, failed, lost: nothing to move, or nothing that
// can be). A sandbox is node's by spec.nodeName, which a move repoints before
// it ends, not by its label or status, which the target's sync rewrites a
// moment later.
func DrainList(objs []warrenv1.Sandbox, node string) (move, left []DrainItem) {
	for i := range objs {
		o := &objs[i]
		if o.Spec.NodeName != node || o.DeletionTimestamp != nil {
			continue
		}
		it := DrainItem{Object: o.Name, ID: o.Status.SandboxID, Phase: o.Status.Phase, Runtime: o.Status.Runtime}
		if it.ID == "" {
			it.ID = o.Labels[LabelSandboxID]
		}
		switch {
		case it.ID == "":
			continue // not made yet: nothing to move
		case Movable(it.Phase):
			move = append(move, it)
		default:
			left = append(left, it)
		}
	}
	return move, left
}

// Movable says whether a drain moves a sandbox in phase. A running one moves
// too: its node hibernates it where the runtime saves memory, else stops it
// and it moves with its files.
func Movable(phase warrenv1.SandboxPhase) bool {
	switch phase {
	case warrenv1.SandboxPaused, warrenv1.SandboxHibernated, warrenv1.SandboxStopped, warrenv1.SandboxRunning:
		return true
	}
	return false
}
