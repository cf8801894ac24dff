package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warrenv1 "github.com/warrenhq/warren/apis/warren/v1alpha1"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/kube/controller"
)

const hour = time.Hour

// TestPlacement: unplaced Sandbox objects spread over the nodes that can
// take them, within each node's sandbox limit, on a node that has their
// template and runs their runtime; drained, not-ready and lease-less nodes
// get none; what fits nowhere gets Placed=False with why.
func TestPlacement(t *testing.T) {
	f := setup(t)
	both := []string{warrenv1.RuntimeNative, warrenv1.RuntimeGVisor}
	a := f.node(nodeSpec{name: "a", ready: true, runtimes: both, templates: []string{"base", "python"}, maxSandboxes: 3, lease: hour})
	b := f.node(nodeSpec{name: "b", ready: true, runtimes: []string{"native"}, templates: []string{"base"}, maxSandboxes: 3, lease: hour})
	f.node(nodeSpec{name: "drained", ready: true, unschedulable: true, runtimes: both, templates: []string{"base", "python"}, lease: hour})
	f.node(nodeSpec{name: "down", ready: false, runtimes: both, templates: []string{"base", "python"}, lease: hour})
	f.node(nodeSpec{name: "nolease", ready: true, runtimes: both, templates: []string{"base", "python"}})
	f.start("gw-1")

	var names []string
	for i := range 4 {
		names = append(names, fmt.Sprintf("base-%d", i))
		f.sandbox(names[i], warrenv1.SandboxSpec{Template: "base"})
	}
	got := f.placed(names...)
	count := map[string]int{}
	for _, node := range got {
		count[node]++
	}
	if count[a] != 2 || count[b] != 2 {
		t.Fatalf("4 sandboxes over two equal nodes: %v, want 2 each", got)
	}

	f.sandbox("gvisor", warrenv1.SandboxSpec{Template: "base", Runtime: warrenv1.RuntimeGVisor})
	if node := f.placed("gvisor")["gvisor"]; node != a {
		t.Fatalf("gvisor sandbox on %s, want %s (the only one running gvisor)", node, a)
	}
	sb := f.get("gvisor")
	c := meta.FindStatusCondition(sb.Status.Conditions, warrenv1.SandboxPlaced)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != controller.ReasonNodeChosen || !strings.Contains(c.Message, "chosen by gw-1") {
		t.Fatalf("Placed condition %+v", c)
	}
	if sb.Status.Phase != warrenv1.SandboxPending {
		t.Fatalf("phase %q, want Pending until its node reports", sb.Status.Phase)
	}

	// a is now full (3): python is built only there.
	f.sandbox("python", warrenv1.SandboxSpec{Template: "python"})
	c = f.notPlaced("python", controller.ReasonFleetFull)
	for _, want := range []string{"template python", "1 at its sandbox limit", "1 template not built", "1 unschedulable", "1 not ready", "1 no live lease"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("message %q lacks %q", c.Message, want)
		}
	}
	t.Logf("not placed: %s", c.Message)
}

// notPlaced waits for name's Placed=False condition of the given reason.
func (f *fixture) notPlaced(name, reason string) *metav1.Condition {
	f.t.Helper()
	var c *metav1.Condition
	f.eventually(30*time.Second, name+" Placed=False "+reason, func() bool {
		c = meta.FindStatusCondition(f.get(name).Status.Conditions, warrenv1.SandboxPlaced)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == reason
	})
	if n := f.get(name).Spec.NodeName; n != "" {
		f.t.Fatalf("%s placed on %s despite Placed=False", name, n)
	}
	return c
}

// TestUnrunnableRuntime: a Sandbox asking for a runtime no node runs is left
// unplaced with a message that says so, and is placed once a node that runs
// it joins.
func TestUnrunnableRuntime(t *testing.T) {
	f := setup(t)
	f.node(nodeSpec{name: "a", ready: true, runtimes: []string{"native"}, lease: hour})
	f.node(nodeSpec{name: "b", ready: true, runtimes: []string{"native"}, lease: hour})
	f.start("gw-1")
	f.sandbox("wants-gvisor", warrenv1.SandboxSpec{Runtime: warrenv1.RuntimeGVisor})
	c := f.notPlaced("wants-gvisor", controller.ReasonNoNodeFits)
	want := "no node can take the sandbox (runtime gvisor); of its 2 nodes: 2 runtime not supported"
	if !strings.HasPrefix(c.Message, want) {
		t.Fatalf("message %q, want it to start with %q", c.Message, want)
	}
	g := f.node(nodeSpec{name: "g", ready: true, runtimes: []string{"gvisor"}, lease: hour})
	if node := f.placed("wants-gvisor")["wants-gvisor"]; node != g {
		t.Fatalf("placed on %s, want %s", node, g)
	}
}

// TestCapacity: a node's memory and sandbox limits hold across a burst of
// placements its status does not show yet.
func TestCapacity(t *testing.T) {
	f := setup(t)
	small := f.node(nodeSpec{name: "small", ready: true, memory: "2Gi", lease: hour})
	big := f.node(nodeSpec{name: "big", ready: true, memory: "8Gi", lease: hour})
	f.start("gw-1")
	var names []string
	for i := range 5 {
		names = append(names, fmt.Sprintf("m-%d", i))
		f.sandbox(names[i], warrenv1.SandboxSpec{Limits: &warrenv1.SandboxLimits{Memory: ptr.To(resource.MustParse("2Gi"))}})
	}
	got := f.placed(names...)
	count := map[string]int{}
	for _, node := range got {
		count[node]++
	}
	if count[small] != 1 || count[big] != 4 {
		t.Fatalf("five 2Gi sandboxes on 2Gi and 8Gi nodes: %v", got)
	}
	f.sandbox("one-too-many", warrenv1.SandboxSpec{Limits: &warrenv1.SandboxLimits{Memory: ptr.To(resource.MustParse("2Gi"))}})
	c := f.notPlaced("one-too-many", controller.ReasonFleetFull)
	if !strings.Contains(c.Message, "2 not enough memory") {
		t.Fatalf("message %q", c.Message)
	}
}

// TestNodeLoss: once a node's Lease lapses its WarrenNode turns not Ready
// and its live sandboxes Lost (keeping their last snapshot), within 2 s of
// the expiry; other nodes' sandboxes and destroyed ones are left alone.
func TestNodeLoss(t *testing.T) {
	f := setup(t)
	const duration = 3 * time.Second
	lost := f.node(nodeSpec{name: "lost", ready: true, runtimes: []string{"native"}})
	live := f.node(nodeSpec{name: "live", ready: true, runtimes: []string{"native"}, lease: hour})
	f.held("running", lost, warrenv1.SandboxRunning, "snap1")
	f.held("paused", lost, warrenv1.SandboxPaused, "")
	f.held("destroyed", lost, warrenv1.SandboxDestroyed, "")
	f.held("elsewhere", live, warrenv1.SandboxRunning, "")
	withReplica := f.get("running")
	withReplica.Status.Replica = &warrenv1.SandboxReplica{Node: live, Snapshot: "snap1", At: metav1.NowMicro()}
	if err := f.c.Status().Update(context.Background(), withReplica); err != nil {
		t.Fatal(err)
	}
	f.start("gw-1")
	lease := f.lease(lost, time.Now(), duration)
	expiry, _ := controller.LeaseExpiry(lease)

	phase := func(name string) warrenv1.SandboxPhase { return f.get(name).Status.Phase }
	f.eventually(duration+10*time.Second, "sandboxes of the lost node Lost", func() bool {
		return phase("running") == warrenv1.SandboxLost && phase("paused") == warrenv1.SandboxLost
	})
	detection := time.Since(expiry)
	t.Logf("node loss detected %v after the Lease's expiry (Lease duration %v; target: within 2s of the expiry)", detection.Round(time.Millisecond), duration)
	if detection > 2*time.Second {
		t.Errorf("detection took %v after the expiry, want ≤ 2s", detection)
	}
	if time.Now().Before(expiry) {
		t.Fatal("marked Lost before its Lease lapsed")
	}

	sb := f.get("running")
	c := meta.FindStatusCondition(sb.Status.Conditions, warrenv1.SandboxReady)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != controller.ReasonNodeLost || !strings.Contains(c.Message, "restores it on node "+live) || !strings.Contains(c.Message, "snapshot snap1") {
		t.Fatalf("Ready condition %+v", c)
	}
	if c := meta.FindStatusCondition(f.get("paused").Status.Conditions, warrenv1.SandboxReady); c == nil || !strings.Contains(c.Message, "no other node holds a copy") {
		t.Fatalf("Ready condition of a Lost sandbox without a copy: %+v", c)
	}
	if sb.Status.LastSnapshot != "snap1" || sb.Status.Node != lost {
		t.Fatalf("status %+v: lastSnapshot and node must be kept", sb.Status)
	}
	if p := phase("destroyed"); p != warrenv1.SandboxDestroyed {
		t.Fatalf("destroyed sandbox turned %s", p)
	}
	if p := phase("elsewhere"); p != warrenv1.SandboxRunning {
		t.Fatalf("sandbox of a live node turned %s", p)
	}
	var wn warrenv1.WarrenNode
	if err := f.c.Get(context.Background(), client.ObjectKey{Name: lost}, &wn); err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(wn.Status.Conditions, warrenv1.NodeReady); c == nil || c.Status != metav1.ConditionFalse || c.Reason != controller.ReasonLeaseExpired {
		t.Fatalf("lost node's Ready condition %+v", c)
	}
	if err := f.c.Get(context.Background(), client.ObjectKey{Name: live}, &wn); err != nil {
		t.Fatal(err)
	}
	if !meta.IsStatusConditionTrue(wn.Status.Conditions, warrenv1.NodeReady) {
		t.Fatalf("live node's Ready condition turned %+v", wn.Status.Conditions)
	}
}

// TestLeaderElection: of two controllers only the leader acts; when it
// stops, the other takes over.
func TestLeaderElection(t *testing.T) {
	f := setup(t)
	f.node(nodeSpec{name: "a", ready: true, lease: hour})
	f.node(nodeSpec{name: "b", ready: true, lease: hour})
	ctls := map[string]*running{"gw-1": f.start("gw-1"), "gw-2": f.start("gw-2")}
	leader := f.leader("")
	var names []string
	for i := range 6 {
		names = append(names, fmt.Sprintf("s-%d", i))
		f.sandbox(names[i], warrenv1.SandboxSpec{})
	}
	f.placed(names...)
	for _, n := range names {
		c := meta.FindStatusCondition(f.get(n).Status.Conditions, warrenv1.SandboxPlaced)
		if c == nil || !strings.HasSuffix(c.Message, "chosen by "+leader) {
			t.Fatalf("%s: Placed %+v, want it chosen by the leader %s", n, c, leader)
		}
	}

	ctls[leader].stop(t)
	next := f.leader(leader)
	f.sandbox("after", warrenv1.SandboxSpec{})
	f.placed("after")
	c := meta.FindStatusCondition(f.get("after").Status.Conditions, warrenv1.SandboxPlaced)
	if c == nil || !strings.HasSuffix(c.Message, "chosen by "+next) {
		t.Fatalf("after the leader stopped: Placed %+v, want it chosen by %s", c, next)
	}
}

// leader waits for the election's Lease to name a holder other than not.
func (f *fixture) leader(not string) string {
	f.t.Helper()
	var holder string
	f.eventually(20*time.Second, "a leader elected", func() bool {
		var l coordinationv1.Lease
		if err := f.c.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: controller.LeaseName}, &l); err != nil {
			return false
		}
		holder = ptr.Deref(l.Spec.HolderIdentity, "")
		return holder != "" && holder != not
	})
	return holder
}

// TestSnapshotLocality: a Sandbox made from a snapshot goes to the node whose
// sandboxes name it, though that node is the busier one.
func TestSnapshotLocality(t *testing.T) {
	f := setup(t)
	f.node(nodeSpec{name: "a", ready: true, lease: hour})
	b := f.node(nodeSpec{name: "b", ready: true, lease: hour})
	for i := range 3 {
		f.held(fmt.Sprintf("on-b-%d", i), b, warrenv1.SandboxRunning, fmt.Sprintf("snap%d", i))
	}
	f.start("gw-1")
	f.sandbox("fork", warrenv1.SandboxSpec{FromSnapshot: "snap1"})
	if node := f.placed("fork")["fork"]; node != b {
		t.Fatalf("fork of snap1 on %s, want %s which holds it", node, b)
	}
	c := meta.FindStatusCondition(f.get("fork").Status.Conditions, warrenv1.SandboxPlaced)
	if !strings.Contains(c.Message, "locality 1") {
		t.Fatalf("Placed message %q does not show the locality", c.Message)
	}
}

// TestNewRejects: options that cannot work are refused with what to fix.
func TestNewRejects(t *testing.T) {
	if _, err := controller.New(controller.Options{Config: &rest.Config{}}); !errdefs.IsInvalid(err) || !strings.Contains(err.Error(), "--gateway-id") {
		t.Fatalf("no identity: %v", err)
	}
	_, err := controller.New(controller.Options{Config: &rest.Config{}, Identity: "x", LeaseDuration: time.Second, RenewDeadline: 2 * time.Second})
	if !errdefs.IsInvalid(err) {
		t.Fatalf("renew deadline past the lease: %v", err)
	}
}

// TestLeadershipLost: a leader whose Lease another holder took stops acting
// within its renew deadline, and leads again once that holder's term
// lapses.
func TestLeadershipLost(t *testing.T) {
	f := setup(t)
	f.node(nodeSpec{name: "a", ready: true, lease: hour})
	f.start("gw-1")
	f.leader("")
	f.sandbox("before", warrenv1.SandboxSpec{})
	f.placed("before")

	// Someone else holds the election for 4 s (as a replica that could
	// not see gw-1's renewals would after taking over).
	var l coordinationv1.Lease
	key := client.ObjectKey{Namespace: f.ns, Name: controller.LeaseName}
	if err := f.c.Get(context.Background(), key, &l); err != nil {
		t.Fatal(err)
	}
	taken := time.Now()
	l.Spec.HolderIdentity = ptr.To("intruder")
	l.Spec.LeaseDurationSeconds = ptr.To(int32(4))
	l.Spec.AcquireTime = &metav1.MicroTime{Time: taken}
	l.Spec.RenewTime = &metav1.MicroTime{Time: taken}
	if err := f.c.Update(context.Background(), &l); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // past gw-1's renew deadline (1.5 s)
	f.sandbox("during", warrenv1.SandboxSpec{})
	time.Sleep(time.Second)
	if n := f.get("during").Spec.NodeName; n != "" && time.Since(taken) < 4*time.Second {
		t.Fatalf("placed on %s while another held the election", n)
	}
	f.placed("during")
	if since := time.Since(taken); since < 4*time.Second {
		t.Fatalf("placed %v after the election was taken for 4s", since)
	}
	if c := meta.FindStatusCondition(f.get("during").Status.Conditions, warrenv1.SandboxPlaced); !strings.HasSuffix(c.Message, "chosen by gw-1") {
		t.Fatalf("Placed %+v", c)
	}
	if h := f.leader("intruder"); h != "gw-1" {
		t.Fatalf("leader %s, want gw-1 back", h)
	}
}
