package controller

import (
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	warrenv1 "github.com/warrenhq/warren/apis/warren/v1alpha1"
	"github.com/warrenhq/warren/internal/kube/fleet"
)

// TestDrainDecision: a cordon alone keeps new sandboxes off; it moves them
// only when the Node's annotation or --drain-on-cordon says so, the
// annotation winning; an uncordoned Node is never drained.
func TestDrainDecision(t *testing.T) {
	for _, c := range []struct {
		unschedulable bool
		annotation    string
		onCordon      bool
		want          drainAction
	}{
		{false, "", false, drainNone},
		{false, "true", true, drainNone},
		{true, "", false, drainCordonOnly},
		{true, "", true, drainMove},
		{true, "true", false, drainMove},
		{true, "false", true, drainCordonOnly},
		{true, "yes", true, drainCordonOnly},
	} {
		got, why := drainDecision(c.unschedulable, c.annotation, c.onCordon)
		if got != c.want {
			t.Errorf("cordoned %v, %s=%q, on-cordon %v: %d, want %d", c.unschedulable, fleet.DrainAnnotation, c.annotation, c.onCordon, got, c.want)
		}
		if (got == drainNone) != (why == "") {
			t.Errorf("cordoned %v, %q: reason %q", c.unschedulable, c.annotation, why)
		}
		if c.annotation == "yes" && !strings.Contains(why, "not true or false") {
			t.Errorf("a bad annotation's reason: %q", why)
		}
	}
}

// TestDrainTally: the condition counts moved, stopped, hibernated and
// failed sandboxes, and says Draining until the drain ends.
func TestDrainTally(t *testing.T) {
	tl := drainTally{total: 4, left: 1}
	tl.add(fleet.DrainItem{ID: "a", Phase: warrenv1.SandboxPaused}, nil)
	tl.add(fleet.DrainItem{ID: "b", Phase: warrenv1.SandboxRunning, Runtime: warrenv1.RuntimeNative}, nil)
	tl.add(fleet.DrainItem{ID: "c", Phase: warrenv1.SandboxRunning, Runtime: warrenv1.RuntimeGVisor}, nil)
	if st, reason := tl.condition(); st != metav1.ConditionFalse || reason != ReasonDraining {
		t.Errorf("under way: %s %s", st, reason)
	}
	tl.add(fleet.DrainItem{ID: "d", Phase: warrenv1.SandboxHibernated}, errors.New("no room"))
	tl.finished = true
	st, reason := tl.condition()
	msg := tl.message()
	if st != metav1.ConditionFalse || reason != ReasonDrainIncomplete {
		t.Errorf("with a failure: %s %s", st, reason)
	}
	for _, want := range []string{"3 of 4 sandboxes moved", "1 stopped first", "1 hibernated first", "1 failed", "1 left", "sandbox d: no room"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	ok := drainTally{total: 1, finished: true}
	ok.add(fleet.DrainItem{ID: "a", Phase: warrenv1.SandboxPaused}, nil)
	if st, reason := ok.condition(); st != metav1.ConditionTrue || reason != ReasonDrained {
		t.Errorf("done: %s %s", st, reason)
	}
}

// TestDrainList: a node's sandboxes by spec.nodeName, the movable ones
// apart from the rest, unmade ones skipped.
func TestDrainList(t *testing.T) {
	sb := func(name, node, id string, phase warrenv1.SandboxPhase) warrenv1.Sandbox {
		o := warrenv1.Sandbox{}
		o.Name, o.Spec.NodeName, o.Status.SandboxID, o.Status.Phase = name, node, id, phase
		return o
	}
	labelled := sb("k", "x", "", warrenv1.SandboxPaused)
	labelled.Labels = map[string]string{fleet.LabelSandboxID: "kid"}
	move, left := fleet.DrainList([]warrenv1.Sandbox{
		sb("a", "x", "a", warrenv1.SandboxPaused),
		sb("b", "x", "b", warrenv1.SandboxRunning),
		sb("c", "y", "c", warrenv1.SandboxPaused),
		sb("d", "x", "d", warrenv1.SandboxLost),
		sb("e", "x", "", warrenv1.SandboxCreating),
		labelled,
	}, "x")
	var ids []string
	for _, it := range move {
		ids = append(ids, it.ID)
	}
	if strings.Join(ids, ",") != "a,b,kid" || len(left) != 1 || left[0].ID != "d" {
		t.Errorf("move %v, left %+v", ids, left)
	}
}
