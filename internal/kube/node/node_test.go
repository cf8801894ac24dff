package node_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warrenv1 "github.com/warrenhq/warren/apis/warren/v1alpha1"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/kube/fleet"
	"github.com/warrenhq/warren/internal/kube/kubetest"
	"github.com/warrenhq/warren/internal/kube/node"
	"github.com/warrenhq/warren/internal/session"
	"github.com/warrenhq/warren/internal/store"
)

// The package's tests share one control plane: starting it is most of
// their time.
var plane kubetest.Shared

func TestMain(m *testing.M) { os.Exit(plane.Main(m)) }

// fixture is one node against the shared control plane, in a namespace of
// its own, with fake sessions and a real store for its keys.
type fixture struct {
	t        *testing.T
	c        client.Client
	ns, name string
	sessions *fakeSessions
	keys     *store.Store
	cfg      node.Config
}

func newFixture(t *testing.T, name string) *fixture {
	t.Helper()
	shared := plane.Get(t)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "warren-node-test-"}}
	if err := shared.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	keys, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "warren.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { keys.Close() })
	f := &fixture{t: t, c: shared.Client, ns: ns.Name, name: name, sessions: newFakeSessions(), keys: keys}
	f.cfg = node.Config{
		Client: shared.Client, Namespace: ns.Name, Node: name, Endpoint: "http://" + name + ":3000",
		Version: "test", LeaseDuration: 3 * time.Second, Sandboxes: f.sessions, Keys: keys, Reporter: fakeReporter{},
		SandboxEvery: 100 * time.Millisecond, StatusEvery: 200 * time.Millisecond, KeyEvery: 100 * time.Millisecond,
	}
	return f
}

func (f *fixture) start() *node.Node {
	f.t.Helper()
	n, err := node.Start(context.Background(), f.cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(n.Close)
	return n
}

func (f *fixture) key(name string) types.NamespacedName {
	return types.NamespacedName{Namespace: f.ns, Name: name}
}

// eventually polls ok every 50 ms for up to 20 s.
func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 20s for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (f *fixture) sandbox(name string) (warrenv1.Sandbox, bool) {
	var o warrenv1.Sandbox
	err := f.c.Get(context.Background(), f.key(name), &o)
	if err != nil && !apierrors.IsNotFound(err) {
		f.t.Fatal(err)
	}
	return o, err == nil
}

// The Lease and the WarrenNode appear and are kept fresh; the fleet's
// admin key Secret is made and its key authenticates at the node.
func TestLeaseNodeAndAdminKey(t *testing.T) {
	f := newFixture(t, "lease-node")
	n := f.start()
	ctx := context.Background()
	var lease coordinationv1.Lease
	if err := f.c.Get(ctx, f.key(fleet.LeaseName(f.name)), &lease); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(*lease.Spec.HolderIdentity, f.name+"_") || *lease.Spec.LeaseDurationSeconds != 3 {
		t.Fatalf("lease %+v", lease.Spec)
	}
	first := lease.Spec.RenewTime.Time
	eventually(t, "a renewal of the Lease", func() bool {
		_ = f.c.Get(ctx, f.key(fleet.LeaseName(f.name)), &lease)
		return lease.Spec.RenewTime.After(first)
	})
	var wn warrenv1.WarrenNode
	eventually(t, "the WarrenNode's status", func() bool {
		return f.c.Get(ctx, types.NamespacedName{Name: f.name}, &wn) == nil && wn.Status.LastHeartbeat != nil
	})
	if wn.Status.Endpoint != f.cfg.Endpoint || wn.Status.Capacity.Memory.Value() != 8<<30 || len(wn.Status.Templates) != 1 || len(wn.Status.Devices) != 1 ||
		len(wn.Status.Conditions) != 1 || wn.Status.Conditions[0].Status != metav1.ConditionTrue {
		t.Fatalf("WarrenNode status %+v", wn.Status)
	}
	var admin corev1.Secret
	if err := f.c.Get(ctx, f.key(fleet.FleetAdminSecret), &admin); err != nil {
		t.Fatal(err)
	}
	plain := string(admin.Data[fleet.KeyDataKey])
	if admin.Labels[fleet.LabelAPIKey] != "true" || string(admin.Data[fleet.KeyDataHash]) != store.HashKey(plain) {
		t.Fatalf("admin Secret %v %v", admin.Labels, admin.Data)
	}
	eventually(t, "the fleet admin key to authenticate", func() bool {
		k, err := f.keys.AuthenticateKey(ctx, plain)
		return err == nil && k.Team == fleet.AdminTeam
	})
	// A node that stops says so.
	n.Close()
	if err := f.c.Get(ctx, types.NamespacedName{Name: f.name}, &wn); err != nil {
		t.Fatal(err)
	}
	if c := wn.Status.Conditions; len(c) != 1 || c[0].Status != metav1.ConditionFalse || c[0].Reason != "Stopped" {
		t.Fatalf("conditions after Close: %+v", c)
	}
}

// A key Secret authenticates at the node while it exists.
func TestKeySecrets(t *testing.T) {
	f := newFixture(t, "keys")
	f.start()
	ctx := context.Background()
	plain, err := store.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	s := corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "k1", Namespace: f.ns, Labels: map[string]string{fleet.LabelAPIKey: "true"}},
		Data: map[string][]byte{fleet.KeyDataHash: []byte(store.HashKey(plain)), fleet.KeyDataTeam: []byte("t1"),
			fleet.KeyDataName: []byte("ci"), fleet.KeyDataPrefix: []byte(plain[:12])},
	}
	if err := f.c.Create(ctx, &s); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Secret's key to authenticate", func() bool {
		k, err := f.keys.AuthenticateKey(ctx, plain)
		return err == nil && k.Team == "t1" && k.ID == "k1"
	})
	if err := f.c.Delete(ctx, &s); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the key to be revoked", func() bool {
		_, err := f.keys.AuthenticateKey(ctx, plain)
		return err != nil
	})
}

// A sandbox made through the node's API gets its object, which follows
// its state and goes when it goes.
func TestPublishesSandboxes(t *testing.T) {
	f := newFixture(t, "publish")
	n := f.start()
	f.sessions.put(store.Sandbox{ID: "api1", Team: "t1", Template: "bb", Runtime: "native", State: store.StateRunning, StartedAt: time.Now()})
	n.Nudge()
	var o warrenv1.Sandbox
	eventually(t, "the sandbox's object, Running", func() bool {
		var ok bool
		o, ok = f.sandbox("api1")
		return ok && o.Status.Phase == warrenv1.SandboxRunning
	})
	if o.Labels[fleet.LabelNode] != f.name || o.Labels[fleet.LabelSandboxID] != "api1" || o.Labels[fleet.LabelTeam] != "t1" ||
		o.Labels[fleet.LabelOrigin] != fleet.OriginAPI || o.Labels[fleet.LabelTemplate] != "bb" ||
		len(o.Finalizers) != 1 || o.Status.Endpoint != f.cfg.Endpoint || o.Status.Node != f.name || o.Status.SandboxID != "api1" {
		t.Fatalf("object %+v", o)
	}
	rv := o.ResourceVersion
	time.Sleep(500 * time.Millisecond)
	if again, _ := f.sandbox("api1"); again.ResourceVersion != rv {
		t.Errorf("a quiet sandbox's object was written again (%s → %s)", rv, again.ResourceVersion)
	}
	f.sessions.put(store.Sandbox{ID: "api1", Team: "t1", Template: "bb", Runtime: "native", State: store.StatePaused})
	eventually(t, "the object Paused", func() bool {
		o, _ := f.sandbox("api1")
		return o.Status.Phase == warrenv1.SandboxPaused
	})
	f.sessions.remove("api1")
	eventually(t, "the object gone", func() bool {
		_, ok := f.sandbox("api1")
		return !ok
	})
}

// A Sandbox object applied with spec.nodeName runs a sandbox, once, even
// across a restart of the node; deleting it kills the sandbox.
func TestRunsAssignedObjects(t *testing.T) {
	f := newFixture(t, "reconcile")
	first := f.start()
	ctx := context.Background()
	o := warrenv1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "mine", Namespace: f.ns, Labels: map[string]string{fleet.LabelTeam: "t9"}},
		Spec: warrenv1.SandboxSpec{Template: "bb", NodeName: f.name, Metadata: map[string]string{"k": "v"}}}
	if err := f.c.Create(ctx, &o); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the object Running with its sandbox", func() bool {
		o, _ = f.sandbox("mine")
		return o.Status.Phase == warrenv1.SandboxRunning && o.Status.SandboxID != ""
	})
	req := f.sessions.lastCreate()
	if req.Team != "t9" || req.Metadata["k"] != "v" || req.Metadata[node.MetaObjectUID] != string(o.UID) {
		t.Fatalf("create %+v", req)
	}
	if o.Labels[fleet.LabelOrigin] != fleet.OriginKube || o.Labels[fleet.LabelSandboxID] != o.Status.SandboxID || len(o.Finalizers) != 1 {
		t.Fatalf("object %+v", o.ObjectMeta)
	}
	// The node restarted adopts it.
	first.Close()
	f.start()
	time.Sleep(time.Second)
	if creates, _ := f.sessions.counts(); creates != 1 {
		t.Fatalf("%d creates for one object", creates)
	}
	if err := f.c.Delete(ctx, &o); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the object gone", func() bool {
		_, ok := f.sandbox("mine")
		return !ok
	})
	if _, deletes := f.sessions.counts(); deletes != 1 {
		t.Fatalf("%d deletes", deletes)
	}
}

// An object whose sandbox cannot be made says so and is not retried until
// its spec changes.
func TestFailedCreate(t *testing.T) {
	f := newFixture(t, "failing")
	f.start()
	ctx := context.Background()
	o := warrenv1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: f.ns},
		Spec: warrenv1.SandboxSpec{Template: "missing", NodeName: f.name}}
	if err := f.c.Create(ctx, &o); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the object Failed", func() bool {
		o, _ = f.sandbox("bad")
		return o.Status.Phase == warrenv1.SandboxFailed
	})
	time.Sleep(500 * time.Millisecond)
	if creates, _ := f.sessions.counts(); creates != 1 {
		t.Fatalf("%d creates of a failing object", creates)
	}
	o.Spec.Template = "bb"
	if err := f.c.Update(ctx, &o); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the object Running after its fix", func() bool {
		o, _ = f.sandbox("bad")
		return o.Status.Phase == warrenv1.SandboxRunning
	})
	// Deleting it kills the sandbox and lets the object go.
	if err := f.c.Delete(ctx, &o); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the object gone", func() bool {
		_, ok := f.sandbox("bad")
		return !ok
	})
}

// An API server that does not answer at start is an error, not a node
// that silently publishes nothing.
func TestUnreachableAtStart(t *testing.T) {
	scheme, err := fleet.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(&rest.Config{Host: "http://127.0.0.1:1", Timeout: 2 * time.Second}, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	_, err = node.Start(context.Background(), node.Config{Client: c, Namespace: "warren", Node: "x", Sandboxes: newFakeSessions(), Reporter: fakeReporter{}})
	if err == nil {
		t.Fatal("started without an API server")
	}
	t.Log(err)
}

// A SandboxPool becomes a warm pool of the node, on top of its --pool
// flags, and the node writes its line in the pool's status; a pool whose
// selector stops taking the node goes.
func TestSandboxPools(t *testing.T) {
	f := newFixture(t, "pools")
	pools := &fakePools{}
	f.cfg.Pools, f.cfg.PoolEvery = pools, 100*time.Millisecond
	f.cfg.BasePools = []session.PoolConfig{{Template: "base", Min: 1}}
	f.cfg.Runtimes = []string{"native"}
	f.start()
	ctx := context.Background()
	sp := warrenv1.SandboxPool{ObjectMeta: metav1.ObjectMeta{Name: "bb", Namespace: f.ns},
		Spec: warrenv1.SandboxPoolSpec{Template: "bb", MinPerNode: 2}}
	if err := f.c.Create(ctx, &sp); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the pool set and its status line written", func() bool {
		if err := f.c.Get(ctx, f.key("bb"), &sp); err != nil {
			t.Fatal(err)
		}
		set := pools.current()
		return len(set) == 2 && set[1].Template == "bb" && set[1].Min == 2 &&
			len(sp.Status.Nodes) == 1 && sp.Status.Nodes[0].Node == f.name && sp.Status.Nodes[0].Ready == 2 && sp.Status.Ready == 2
	})
	sp.Spec.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"zone": "elsewhere"}}
	if err := f.c.Update(ctx, &sp); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the pool gone from the node and its line removed", func() bool {
		if err := f.c.Get(ctx, f.key("bb"), &sp); err != nil {
			t.Fatal(err)
		}
		return len(pools.current()) == 1 && len(sp.Status.Nodes) == 0
	})
	// A runtime the node does not have: the pool's line says so, and the
	// node keeps no such pool.
	gv := warrenv1.SandboxPool{ObjectMeta: metav1.ObjectMeta{Name: "gv", Namespace: f.ns},
		Spec: warrenv1.SandboxPoolSpec{Template: "bb", Runtime: "gvisor", MinPerNode: 1}}
	if err := f.c.Create(ctx, &gv); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the pool's line saying the runtime is missing", func() bool {
		if err := f.c.Get(ctx, f.key("gv"), &gv); err != nil {
			t.Fatal(err)
		}
		return len(gv.Status.Nodes) == 1 && strings.Contains(gv.Status.Nodes[0].LastFailure, "runtime gvisor is not available on this node")
	})
	if len(pools.current()) != 1 {
		t.Fatalf("pools %+v: want the base pool only", pools.current())
	}
}

// With a watching client an applied object is run without waiting for a
// poll (here the poll is an hour away).
func TestWatchNudgesTheSync(t *testing.T) {
	f := newFixture(t, "watch")
	shared := plane.Get(t)
	wc, err := client.NewWithWatch(shared.Config, client.Options{Scheme: shared.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	f.cfg.Client, f.cfg.SandboxEvery = wc, time.Hour
	f.start()
	time.Sleep(200 * time.Millisecond) // the first pass, before the object exists
	o := warrenv1.Sandbox{ObjectMeta: metav1.ObjectMeta{Name: "watched", Namespace: f.ns},
		Spec: warrenv1.SandboxSpec{Template: "bb", NodeName: f.name}}
	if err := f.c.Create(context.Background(), &o); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the watched object Running", func() bool {
		o, _ = f.sandbox("watched")
		return o.Status.Phase == warrenv1.SandboxRunning
	})
}

// Two daemons with one node name: the second is refused while the first
// renews the Lease, starts at once once the first stopped, and waits out
// the term of a holder that stopped renewing without stopping (killed).
func TestDuplicateNodeName(t *testing.T) {
	f := newFixture(t, "twice")
	first := f.start()
	began := time.Now()
	if n, err := node.Start(context.Background(), f.cfg); err == nil || !errdefs.IsConflict(err) ||
		!strings.Contains(err.Error(), "another warren daemon") || !strings.Contains(err.Error(), "--node-name") {
		if n != nil {
			n.Close()
		}
		t.Fatalf("a second daemon of node twice: %v, want a conflict naming the other daemon", err)
	}
	t.Logf("second daemon refused after %s (Lease 3s)", time.Since(began).Round(time.Millisecond))
	first.Close()
	began = time.Now()
	second := f.start()
	if took := time.Since(began); took > time.Second {
		t.Errorf("a start after a clean stop took %s, want no wait for the Lease", took)
	}
	second.Close()

	// A holder that no longer renews: a daemon killed (its Lease as it left it).
	ctx := context.Background()
	var lease coordinationv1.Lease
	if err := f.c.Get(ctx, f.key(fleet.LeaseName(f.name)), &lease); err != nil {
		t.Fatal(err)
	}
	lease.Spec.HolderIdentity = ptr.To(f.name + "_killed")
	lease.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
	if err := f.c.Update(ctx, &lease); err != nil {
		t.Fatal(err)
	}
	began = time.Now()
	f.start()
	if took := time.Since(began); took < 2*time.Second || took > 6*time.Second {
		t.Errorf("a start after a killed holder took %s, want about its Lease term (3s)", took)
	}
}
