package controller

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	warrenv1 "github.com/warrenhq/warren/apis/warren/v1alpha1"
)

// When a sandbox at rest needs a new copy.
func TestReplicaDue(t *testing.T) {
	paused := time.Date(2026, 11, 28, 1, 0, 0, 0, time.UTC)
	sb := func(rep *warrenv1.SandboxReplica) *warrenv1.Sandbox {
		return &warrenv1.Sandbox{Status: warrenv1.SandboxStatus{
			Phase: warrenv1.SandboxPaused, Node: "n1", Replica: rep,
			Conditions: []metav1.Condition{{Type: warrenv1.SandboxReady, Status: metav1.ConditionFalse, LastTransitionTime: metav1.NewTime(paused)}},
		}}
	}
	rep := func(node string, at time.Time) *warrenv1.SandboxReplica {
		return &warrenv1.SandboxReplica{Node: node, Snapshot: "s", At: metav1.NewMicroTime(at)}
	}
	live := func(n string) bool { return n != "dead" }
	for _, c := range []struct {
		name string
		sb   *warrenv1.Sandbox
		want bool
	}{
		{"no copy", sb(nil), true},
		{"a copy taken after the pause", sb(rep("n2", paused.Add(5*time.Second))), false},
		{"a copy from before the pause (it ran since)", sb(rep("n2", paused.Add(-time.Minute))), true},
		{"a copy from the pause's second", sb(rep("n2", paused.Add(300*time.Millisecond))), true},
		{"the copy's node is lost", sb(rep("dead", paused.Add(5*time.Second))), true},
		{"the copy is on the sandbox's own node (restored there)", sb(rep("n1", paused.Add(5*time.Second))), true},
	} {
		if got := replicaDue(c.sb, live); got != c.want {
			t.Errorf("%s: replicaDue = %v, want %v", c.name, got, c.want)
		}
	}
}
