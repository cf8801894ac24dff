package kubetest_test

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warrenv1 "github.com/warrenhq/warren/apis/warren/v1alpha1"
)

func sandbox(ns, name string) *warrenv1.Sandbox {
	return &warrenv1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: warrenv1.SandboxSpec{
			Template: "base",
			Runtime:  warrenv1.RuntimeGVisor,
			Limits: &warrenv1.SandboxLimits{
				Memory: ptr.To(resource.MustParse("512Mi")),
				CPU:    ptr.To(resource.MustParse("500m")),
				Disk:   ptr.To(resource.MustParse("2Gi")),
				Pids:   ptr.To[int64](256),
			},
			Timeout: &metav1.Duration{Duration: 10 * time.Minute},
			Network: &warrenv1.SandboxNetwork{
				AllowOut: []string{"pypi.org", "*.github.com", "1.1.1.1/32"},
				DenyOut:  []string{"0.0.0.0/0"},
			},
			Metadata: map[string]string{"user": "alice"},
		},
	}
}

func TestSandboxSpecAndStatus(t *testing.T) {
	e, ns := env(t)
	ctx := context.Background()
	sb := sandbox(ns, "one")
	if err := e.Client.Create(ctx, sb); err != nil {
		t.Fatalf("create: %v", err)
	}

	// Status goes through its subresource; the spec, placed, through the
	// object. Neither write touches the other half.
	sb.Status = warrenv1.SandboxStatus{
		Phase:     warrenv1.SandboxRunning,
		Node:      "node-a",
		SandboxID: "i8f3kq2m",
		Runtime:   warrenv1.RuntimeGVisor,
		Endpoint:  "http://10.0.0.7:3000",
		StartedAt: ptr.To(metav1.Now()),
	}
	meta.SetStatusCondition(&sb.Status.Conditions, metav1.Condition{
		Type: warrenv1.SandboxReady, Status: metav1.ConditionTrue, Reason: "Running", Message: "serving",
	})
	if err := e.Client.Status().Update(ctx, sb); err != nil {
		t.Fatalf("status update: %v", err)
	}
	sb.Spec.NodeName = "node-a"
	sb.Status.Phase = warrenv1.SandboxFailed // dropped: not the status subresource
	if err := e.Client.Update(ctx, sb); err != nil {
		t.Fatalf("spec update: %v", err)
	}

	var got warrenv1.Sandbox
	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(sb), &got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.NodeName != "node-a" || got.Status.Phase != warrenv1.SandboxRunning || got.Status.SandboxID != "i8f3kq2m" {
		t.Fatalf("got spec.nodeName %q, status.phase %q, status.sandboxID %q; want node-a, Running, i8f3kq2m",
			got.Spec.NodeName, got.Status.Phase, got.Status.SandboxID)
	}
	if !meta.IsStatusConditionTrue(got.Status.Conditions, warrenv1.SandboxReady) {
		t.Fatalf("Ready condition lost: %+v", got.Status.Conditions)
	}
	if m := got.Spec.Limits.Memory; m == nil || m.Value() != 512<<20 {
		t.Fatalf("memory limit came back as %v, want 512Mi", m)
	}
	if got.Spec.Timeout.Duration != 10*time.Minute || len(got.Spec.Network.AllowOut) != 3 {
		t.Fatalf("spec did not round-trip: %+v", got.Spec)
	}
}

func TestSandboxPoolAndWarrenNode(t *testing.T) {
	e, ns := env(t)
	ctx := context.Background()
	pool := &warrenv1.SandboxPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "python"},
		Spec: warrenv1.SandboxPoolSpec{
			Template: "python", Runtime: warrenv1.RuntimeNative, MinPerNode: 2, MaxPerNode: 4,
			TTL: &metav1.Duration{Duration: 10 * time.Minute},
		},
	}
	if err := e.Client.Create(ctx, pool); err != nil {
		t.Fatalf("create pool: %v", err)
	}
	pool.Status.Nodes = []warrenv1.SandboxPoolNodeStatus{{Node: "node-a", Ready: 2, Hits: 5}, {Node: "node-b", Ready: 1}}
	pool.Status.Ready, pool.Status.NodeCount = 3, 2
	if err := e.Client.Status().Update(ctx, pool); err != nil {
		t.Fatalf("pool status: %v", err)
	}

	node := &warrenv1.WarrenNode{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: map[string]string{"zone": "a"}}}
	if err := e.Client.Create(ctx, node); err != nil {
		t.Fatalf("create node: %v", err)
	}
	t.Cleanup(func() { _ = e.Client.Delete(ctx, node) }) // cluster-scoped: no namespace takes it away
	node.Status = warrenv1.WarrenNodeStatus{
		Endpoint: "http://10.0.0.7:3000",
		Capacity: warrenv1.NodeResources{Memory: ptr.To(resource.MustParse("64Gi")), CPU: ptr.To(resource.MustParse("16")), Sandboxes: 100},
		Used:     warrenv1.NodeResources{Memory: ptr.To(resource.MustParse("3Gi")), Sandboxes: 6},
		Runtimes: []string{"gvisor", "native"}, Templates: []string{"base", "python"},
		Snapshots:     warrenv1.SnapshotSummary{Count: 42, Bytes: 7 << 30},
		LastHeartbeat: ptr.To(metav1.Now()),
	}
	if err := e.Client.Status().Update(ctx, node); err != nil {
		t.Fatalf("node status: %v", err)
	}

	var gotPool warrenv1.SandboxPool
	if err := e.Client.Get(ctx, client.ObjectKeyFromObject(pool), &gotPool); err != nil {
		t.Fatal(err)
	}
	if gotPool.Status.Ready != 3 || len(gotPool.Status.Nodes) != 2 || gotPool.Spec.TTL.Duration != 10*time.Minute {
		t.Fatalf("pool came back as %+v", gotPool)
	}
	var gotNode warrenv1.WarrenNode
	if err := e.Client.Get(ctx, client.ObjectKey{Name: "node-a"}, &gotNode); err != nil {
		t.Fatal(err)
	}
	if gotNode.Namespace != "" || gotNode.Status.Used.Sandboxes != 6 || gotNode.Status.Snapshots.Count != 42 ||
		gotNode.Status.Capacity.Memory.Cmp(resource.MustParse("64Gi")) != 0 {
		t.Fatalf("node came back as %+v", gotNode)
	}
}
