package fleet_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	warrenv1 "github.com/warrenhq/warren/apis/warren/v1alpha1"
	"github.com/warrenhq/warren/internal/kube/fleet"
)

// TestUnschedulable: placement keeps off a node drained with warren node
// drain (spec) or whose Kubernetes Node is cordoned (the condition), and
// not off one whose cordon was lifted.
func TestUnschedulable(t *testing.T) {
	var wn warrenv1.WarrenNode
	if fleet.Unschedulable(&wn) {
		t.Error("a fresh node is unschedulable")
	}
	wn.Spec.Unschedulable = true
	if !fleet.Unschedulable(&wn) {
		t.Error("spec.unschedulable is ignored")
	}
	wn.Spec.Unschedulable = false
	meta.SetStatusCondition(&wn.Status.Conditions, metav1.Condition{Type: fleet.NodeCordoned, Status: metav1.ConditionTrue, Reason: "NodeCordoned"})
	if !fleet.Unschedulable(&wn) {
		t.Error("the Cordoned condition is ignored")
	}
	meta.SetStatusCondition(&wn.Status.Conditions, metav1.Condition{Type: fleet.NodeCordoned, Status: metav1.ConditionFalse, Reason: "NodeCordoned"})
	if fleet.Unschedulable(&wn) {
		t.Error("Cordoned=False keeps the node unschedulable")
	}
}
