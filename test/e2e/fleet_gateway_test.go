package e2e

import (
	"context"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	warrenv1 "github.com/warrenhq/warren/apis/warren/v1alpha1"
	"github.com/warrenhq/warren/client"
)

// sandboxNode waits for the Sandbox object of a sandbox made through the
// API (named by its id) and returns the node it says holds it.
func (f *fleetT) sandboxNode(ctx context.Context, id string) string {
	f.t.Helper()
	var o warrenv1.Sandbox
	waitFor(f.t, 30*time.Second, "the Sandbox object of "+id, func() bool {
		return f.env.Client.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: id}, &o) == nil && o.Status.Node != ""
	})
	return o.Status.Node
}

// TestFleetGateway: two node daemons and two gateways on one control plane.
// Creates through a gateway spread over the nodes; every later call (exec,
// files, list, fork, delete) reaches the owner through either gateway; a
// fork lands on its snapshot's node; a create with an Idempotency-Key
// retried through the other gateway gets the first one's sandbox.
func TestFleetGateway(t *testing.T) {
	t.Parallel()
	f := startFleet(t, 2, 2)
	ctx := ctxT(t, 5*time.Minute)
	g0, g1 := f.client(ctx, 0), f.client(ctx, 1)

	var created []string
	nodes := map[string]int{}
	for i := range 4 {
		sb, err := g0.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", Metadata: map[string]string{"n": string(rune('0' + i))}})
		if err != nil {
			t.Fatalf("create %d through the gateway: %v", i, err)
		}
		created = append(created, sb.SandboxID)
		nodes[f.sandboxNode(ctx, sb.SandboxID)]++
	}
	if len(nodes) != 2 {
		t.Errorf("four creates through the gateway landed on %v, want both nodes used", nodes)
	}
	for _, id := range created {
		for gi, g := range []*client.Client{g0, g1} {
			res, err := g.Commands.ExecWait(ctx, id, client.ExecRequest{Command: "echo hi from $(hostname)"})
			if err != nil || res.ExitCode != 0 || !strings.HasPrefix(res.Stdout, "hi from") {
				t.Errorf("exec in %s through gateway %d: %+v %v", id, gi, res, err)
			}
		}
	}
	list, _, err := g1.Sandboxes.List(ctx, client.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, sb := range list {
		listed = append(listed, sb.SandboxID)
	}
	sort.Strings(listed)
	want := append([]string(nil), created...)
	sort.Strings(want)
	if strings.Join(listed, ",") != strings.Join(want, ",") {
		t.Errorf("list through the other gateway = %v, want %v", listed, want)
	}

	// A fork lands where its snapshot is.
	if _, err := g1.Commands.ExecWait(ctx, created[0], client.ExecRequest{Command: "echo forked > /tmp/mark"}); err != nil {
		t.Fatal(err)
	}
	forks, err := g1.Snapshots.Fork(ctx, created[0], client.ForkRequest{Count: 2})
	if err != nil {
		t.Fatal(err)
	}
	owner := f.sandboxNode(ctx, created[0])
	for _, fk := range forks {
		if fk.Error != nil {
			t.Fatalf("fork: %v", fk.Error)
		}
		if n := f.sandboxNode(ctx, fk.Sandbox.SandboxID); n != owner {
			t.Errorf("fork %s on %s, its snapshot's sandbox on %s", fk.Sandbox.SandboxID, n, owner)
		}
		res, err := g0.Commands.ExecWait(ctx, fk.Sandbox.SandboxID, client.ExecRequest{Command: "cat /tmp/mark"})
		if err != nil || res.Stdout != "forked\n" {
			t.Errorf("the fork's file through the gateway: %+v %v", res, err)
		}
	}

	// A create from a snapshot whose node is drained: the snapshot is
	// copied to the other node, and the sandbox there has its files.
	snap, err := g0.Snapshots.Create(ctx, created[0], client.NewSnapshot{})
	if err != nil {
		t.Fatal(err)
	}
	f.setUnschedulable(ctx, owner, true)
	moved, err := g1.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: snap.SnapshotID})
	if err != nil {
		t.Fatalf("create from snapshot %s with its node drained: %v", snap.SnapshotID, err)
	}
	if n := f.sandboxNode(ctx, moved.SandboxID); n == owner {
		t.Errorf("a create from a snapshot landed on its drained node %s", n)
	}
	if res, err := g0.Commands.ExecWait(ctx, moved.SandboxID, client.ExecRequest{Command: "cat /tmp/mark"}); err != nil || res.Stdout != "forked\n" {
		t.Errorf("the copied snapshot's file in %s: %+v %v", moved.SandboxID, res, err)
	}
	f.setUnschedulable(ctx, owner, false)

	// One key, two gateways: one sandbox.
	a, err := g0.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", IdempotencyKey: "fleet-retry"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := g1.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", IdempotencyKey: "fleet-retry"})
	if err != nil {
		t.Fatal(err)
	}
	if a.SandboxID != b.SandboxID {
		t.Errorf("a create with one Idempotency-Key through two gateways made %s and %s", a.SandboxID, b.SandboxID)
	}

	for _, id := range created {
		if err := g1.Sandboxes.Delete(ctx, id); err != nil {
			t.Errorf("delete %s through the gateway: %v", id, err)
		}
	}
	waitFor(t, 30*time.Second, "the deleted sandboxes' objects to go", func() bool {
		var l warrenv1.SandboxList
		if err := f.env.Client.List(ctx, &l); err != nil {
			return false
		}
		for _, o := range l.Items {
			for _, id := range created {
				if o.Name == id {
					return false
				}
			}
		}
		return true
	})
	if _, err := g0.Sandboxes.Get(ctx, created[0]); client.StatusCode(err) != 404 {
		t.Errorf("a deleted sandbox through the gateway: %v, want 404", err)
	}
}

// setUnschedulable sets a node's drain switch (WarrenNode spec) and waits
// until the gateways' caches can have seen it.
func (f *fleetT) setUnschedulable(ctx context.Context, node string, on bool) {
	f.t.Helper()
	var wn warrenv1.WarrenNode
	if err := f.env.Client.Get(ctx, types.NamespacedName{Name: node}, &wn); err != nil {
		f.t.Fatal(err)
	}
	// A merge patch, not an update: the node writes its WarrenNode's status
	// meanwhile, and an update of the version read would conflict with it.
	base := wn.DeepCopy()
	wn.Spec.Unschedulable = on
	if err := f.env.Client.Patch(ctx, &wn, ctrlclient.MergeFrom(base)); err != nil {
		f.t.Fatal(err)
	}
	time.Sleep(time.Second) // the watch's delivery to the gateways' caches
}

// TestFleetE2BSDK runs the E2B compatibility suite (the unmodified e2b npm
// package) through a gateway in front of three node daemons, two of which
// have the base template the suite's sandboxes start from.
func TestFleetE2BSDK(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the base template by debootstrap (minutes): not in -short mode")
	}
	requireNode(t) // before minutes of building
	f := startFleet(t, 3, 2)
	start := time.Now()
	var wg sync.WaitGroup
	for _, m := range f.nodes[:2] {
		wg.Go(func() {
			m.d.mustCLI("template", "build", "base", "--debootstrap", "bookworm", "--data-dir", m.d.dataDir)
		})
	}
	wg.Wait()
	t.Logf("base template built on two nodes in %s", time.Since(start).Round(time.Millisecond))
	ctx := ctxT(t, 20*time.Minute)
	for _, m := range f.nodes[:2] {
		var wn warrenv1.WarrenNode
		waitFor(t, time.Minute, "WarrenNode "+m.name+" listing template base", func() bool {
			return f.env.Client.Get(ctx, types.NamespacedName{Name: m.name}, &wn) == nil && slices.Contains(wn.Status.Templates, "base")
		})
	}
	// Shared volumes live on one node and the gateway does not route them
	// (README, "Shared volumes"). Template builds it routes to the node
	// that builds them (docs/kubernetes.md, "Templates built from steps");
	// templates_image needs the registry TestTemplateImage runs, templates_pkgs
	// the base template's pip (the fleet's nodes build a smaller one).
	runE2BSuite(t, "http://"+f.gateways[0].addr, f.adminKey(ctx), nil, "volumes", "templates_image", "templates_pkgs")
}
