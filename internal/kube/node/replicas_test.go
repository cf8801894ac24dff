package node

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	warrenv1 "github.com/warrenhq/warren/apis/warren/v1alpha1"
	"github.com/warrenhq/warren/internal/kube/fleet"
	"github.com/warrenhq/warren/internal/store"
)

// Which copies a node keeps for other nodes, and which it drops.
func TestReplicaSweep(t *testing.T) {
	now := time.Date(2026, 11, 28, 1, 0, 0, 0, time.UTC)
	old, fresh := now.Add(-time.Hour), now.Add(-10*time.Second)
	snaps := []store.Snapshot{
		{ID: "r1", Team: "t1", SandboxID: "away", CreatedAt: old},
		{ID: "r2", Team: "t1", SandboxID: "away", CreatedAt: fresh},
		{ID: "r3", Team: "t1", SandboxID: "mine", CreatedAt: old}, // this node's own sandbox
		{ID: "r4", Team: "t1", SandboxID: "gone", CreatedAt: old},
	}
	kept := keptReplicas(snaps, []store.Sandbox{{ID: "mine"}})
	if len(kept) != 2 || kept[0].SandboxID != "away" || !kept[0].Newest.Equal(fresh) || kept[1].SandboxID != "gone" {
		t.Fatalf("keptReplicas = %+v, want away (newest %v) and gone", kept, fresh)
	}
	named := func(node, team string) warrenv1.Sandbox {
		return warrenv1.Sandbox{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{fleet.LabelTeam: team}},
			Status:     warrenv1.SandboxStatus{Replica: &warrenv1.SandboxReplica{Node: node, Snapshot: "r"}},
		}
	}
	r := replicaOf{Team: "t1", SandboxID: "s", Newest: old}
	for _, c := range []struct {
		name string
		r    replicaOf
		objs []warrenv1.Sandbox
		want bool
	}{
		{"its object names this node", r, []warrenv1.Sandbox{named("n1", "t1")}, false},
		{"its copy is kept on another node now", r, []warrenv1.Sandbox{named("n2", "t1")}, true},
		{"the sandbox and its object are gone", r, nil, true},
		{"an object of another team names this node", r, []warrenv1.Sandbox{named("n1", "t2")}, true},
		{"just pulled, not recorded yet", replicaOf{Team: "t1", SandboxID: "s", Newest: fresh}, nil, false},
	} {
		if got := replicaUnneeded("n1", c.r, c.objs, now); got != c.want {
			t.Errorf("%s: replicaUnneeded = %v, want %v", c.name, got, c.want)
		}
	}
}
