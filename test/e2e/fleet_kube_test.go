package e2e

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	warrenv1 "github.com/warrenhq/warren/apis/warren/v1alpha1"
	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/kube/controller"
	"github.com/warrenhq/warren/internal/kube/fleet"
)

// object reads a Sandbox object; ok is false when there is none.
func (f *fleetT) object(ctx context.Context, name string) (warrenv1.Sandbox, bool) {
	var o warrenv1.Sandbox
	err := f.env.Client.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: name}, &o)
	return o, err == nil
}

// TestFleetKubectlApply: a Sandbox object applied with no node is placed
// by the gateway's controller, run by that node and reached through the
// gateway by its sandbox id; deleting the object kills the sandbox.
func TestFleetKubectlApply(t *testing.T) {
	t.Parallel()
	f := startFleet(t, 2, 1)
	ctx := ctxT(t, 4*time.Minute)
	g := f.client(ctx, 0)
	o := warrenv1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Name: "applied", Namespace: f.ns},
		Spec:       warrenv1.SandboxSpec{Template: "bb", Metadata: map[string]string{"from": "kubectl"}},
	}
	if err := f.env.Client.Create(ctx, &o); err != nil {
		t.Fatal(err)
	}
	applied := time.Now()
	waitFor(t, time.Minute, "the applied object placed and Running", func() bool {
		o, _ = f.object(ctx, "applied")
		return o.Spec.NodeName != "" && o.Status.Phase == warrenv1.SandboxRunning && o.Status.SandboxID != ""
	})
	t.Logf("applied → Running on %s in %s", o.Spec.NodeName, time.Since(applied).Round(time.Millisecond))
	if !meta.IsStatusConditionTrue(o.Status.Conditions, warrenv1.SandboxPlaced) {
		t.Errorf("conditions %+v, want Placed=True", o.Status.Conditions)
	}
	id := o.Status.SandboxID
	res, err := g.Commands.ExecWait(ctx, id, client.ExecRequest{Command: "echo from-kube"})
	if err != nil || res.Stdout != "from-kube\n" {
		t.Fatalf("exec in the applied sandbox through the gateway: %+v %v", res, err)
	}
	sb, err := g.Sandboxes.Get(ctx, id)
	if err != nil || sb.Metadata["from"] != "kubectl" {
		t.Errorf("the applied sandbox through the gateway: %+v %v", sb, err)
	}
	if err := f.env.Client.Delete(ctx, &o); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the deleted object's sandbox killed", func() bool {
		_, err := g.Sandboxes.Get(ctx, id)
		_, ok := f.object(ctx, "applied")
		return client.StatusCode(err) == 404 && !ok
	})
}

// TestFleetNodeLoss: a node daemon killed with kill -9 stops renewing its
// Lease; within the Lease's duration and 2 s more, its sandboxes' objects
// turn Lost (and its WarrenNode not Ready) while the other node's stay
// Running. Started again, the node takes its sandboxes (which outlived
// their daemon) back: their objects are Running again on it, exec works
// through the gateway, and none runs twice.
func TestFleetNodeLoss(t *testing.T) {
	t.Parallel()
	f := startFleet(t, 2, 1)
	ctx := ctxT(t, 4*time.Minute)
	g := f.client(ctx, 0)
	byNode := map[string][]string{}
	for range 4 {
		sb, err := g.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb"})
		if err != nil {
			t.Fatal(err)
		}
		n := f.sandboxNode(ctx, sb.SandboxID)
		byNode[n] = append(byNode[n], sb.SandboxID)
	}
	lost, kept := f.nodes[1], f.nodes[0]
	if len(byNode[lost.name]) == 0 || len(byNode[kept.name]) == 0 {
		t.Fatalf("sandboxes by node %v: want some on each", byNode)
	}
	lost.d.stop(syscall.SIGKILL)
	var lease coordinationv1.Lease
	if err := f.env.Client.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: fleet.LeaseName(lost.name)}, &lease); err != nil {
		t.Fatal(err)
	}
	expiry, _ := controller.LeaseExpiry(&lease)
	waitFor(t, time.Minute, "the lost node's sandboxes Lost", func() bool {
		for _, id := range byNode[lost.name] {
			if o, _ := f.object(ctx, id); o.Status.Phase != warrenv1.SandboxLost {
				return false
			}
		}
		return true
	})
	detected := time.Since(expiry)
	t.Logf("Lost %s after the Lease expired (Lease %ds; target ≤ 2 s after)", detected.Round(time.Millisecond), *lease.Spec.LeaseDurationSeconds)
	for _, id := range byNode[kept.name] {
		if o, _ := f.object(ctx, id); o.Status.Phase != warrenv1.SandboxRunning {
			t.Errorf("sandbox %s on the live node is %s, want Running", id, o.Status.Phase)
		}
	}
	var wn warrenv1.WarrenNode
	if err := f.env.Client.Get(ctx, types.NamespacedName{Name: lost.name}, &wn); err != nil || meta.IsStatusConditionTrue(wn.Status.Conditions, warrenv1.NodeReady) {
		t.Errorf("the lost node's WarrenNode: %+v %v, want Ready not True", wn.Status.Conditions, err)
	}
	if _, err := g.Commands.ExecWait(ctx, byNode[lost.name][0], client.ExecRequest{Command: "true"}); client.StatusCode(err) != 502 && client.StatusCode(err) != 503 {
		t.Errorf("exec in a lost node's sandbox: %v, want 502 or 503 saying its node is not Ready", err)
	}

	lost.d.start()
	waitFor(t, time.Minute, "the returned node's sandboxes Running again", func() bool {
		for _, id := range byNode[lost.name] {
			if o, _ := f.object(ctx, id); o.Status.Phase != warrenv1.SandboxRunning || o.Status.Node != lost.name {
				return false
			}
		}
		return true
	})
	for _, id := range byNode[lost.name] {
		res, err := g.Commands.ExecWait(ctx, id, client.ExecRequest{Command: "echo back"})
		if err != nil || res.Stdout != "back\n" {
			t.Errorf("exec in %s after its node came back: %+v %v", id, res, err)
		}
	}
	list, _, err := g.Sandboxes.List(ctx, client.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, sb := range list {
		seen[sb.SandboxID]++
	}
	if len(list) != 4 || len(seen) != 4 {
		t.Errorf("after the node came back the fleet lists %d sandboxes (%d distinct), want the 4: %s", len(list), len(seen), strings.Join(keys(seen), ","))
	}
}

func keys(m map[string]int) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
