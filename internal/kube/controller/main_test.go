package controller_test

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warrenv1 "github.com/warrenhq/warren/apis/warren/v1alpha1"
	"github.com/warrenhq/warren/internal/kube/controller"
	"github.com/warrenhq/warren/internal/kube/fleet"
	"github.com/warrenhq/warren/internal/kube/kubetest"
)

// The package's tests share one control plane: starting it is most of their
// time. There are no node daemons: the tests write the WarrenNodes, Leases
// and Sandbox statuses the nodes would.
var plane kubetest.Shared

func TestMain(m *testing.M) { os.Exit(plane.Main(m)) }

// fixture is one test's namespace on the shared control plane.
type fixture struct {
	t  *testing.T
	c  client.Client
	ns string
}

func setup(t *testing.T) *fixture {
	t.Helper()
	shared := plane.Get(t)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "warren-ctl-"}}
	if err := shared.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("namespace: %v", err)
	}
	return &fixture{t: t, c: shared.Client, ns: ns.Name}
}

// nodeSpec is a WarrenNode the test writes as its daemon would.
type nodeSpec struct {
	name          string
	ready         bool
	unschedulable bool
	runtimes      []string
	templates     []string
	maxSandboxes  int32
	memory        string // capacity; "" reports none
	// lease: its duration; the Lease is renewed now. 0: no Lease.
	lease time.Duration
}

// node writes a WarrenNode (cluster-scoped: named after the namespace, and
// deleted when the test ends) and its Lease.
func (f *fixture) node(s nodeSpec) string {
	f.t.Helper()
	ctx := context.Background()
	name := f.ns + "-" + s.name
	wn := &warrenv1.WarrenNode{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: warrenv1.WarrenNodeSpec{Unschedulable: s.unschedulable}}
	if err := f.c.Create(ctx, wn); err != nil {
		f.t.Fatalf("WarrenNode %s: %v", name, err)
	}
	f.t.Cleanup(func() { _ = f.c.Delete(context.Background(), wn) })
	ready := metav1.ConditionFalse
	if s.ready {
		ready = metav1.ConditionTrue
	}
	wn.Status = warrenv1.WarrenNodeStatus{
		Endpoint: "http://127.0.0.1:1", Runtimes: s.runtimes, Templates: s.templates,
		Capacity:   warrenv1.NodeResources{Sandboxes: s.maxSandboxes},
		Conditions: []metav1.Condition{{Type: warrenv1.NodeReady, Status: ready, Reason: "Test", LastTransitionTime: metav1.Now()}},
	}
	if s.memory != "" {
		wn.Status.Capacity.Memory = ptr.To(resource.MustParse(s.memory))
	}
	if err := f.c.Status().Update(ctx, wn); err != nil {
		f.t.Fatalf("WarrenNode %s status: %v", name, err)
	}
	if s.lease > 0 {
		f.lease(name, time.Now(), s.lease)
	}
	return name
}

// lease writes node's Lease as renewed at renewed.
func (f *fixture) lease(node string, renewed time.Time, d time.Duration) *coordinationv1.Lease {
	f.t.Helper()
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: fleet.LeaseName(node)},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To(node),
			LeaseDurationSeconds: ptr.To(int32(d / time.Second)),
			RenewTime:            &metav1.MicroTime{Time: renewed},
		},
	}
	if err := f.c.Create(context.Background(), l); err != nil {
		f.t.Fatalf("Lease of %s: %v", node, err)
	}
	return l
}

// sandbox writes an unplaced Sandbox object (as kubectl apply would).
func (f *fixture) sandbox(name string, spec warrenv1.SandboxSpec) *warrenv1.Sandbox {
	f.t.Helper()
	sb := &warrenv1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name}, Spec: spec}
	if err := f.c.Create(context.Background(), sb); err != nil {
		f.t.Fatalf("Sandbox %s: %v", name, err)
	}
	return sb
}

// held writes a Sandbox object as a node holding it reports it.
func (f *fixture) held(name, node string, phase warrenv1.SandboxPhase, lastSnapshot string) {
	f.t.Helper()
	sb := f.sandbox(name, warrenv1.SandboxSpec{NodeName: node})
	sb.Status = warrenv1.SandboxStatus{Phase: phase, Node: node, SandboxID: name, LastSnapshot: lastSnapshot,
		Conditions: []metav1.Condition{{Type: warrenv1.SandboxReady, Status: metav1.ConditionTrue, Reason: "Running", LastTransitionTime: metav1.Now()}}}
	if err := f.c.Status().Update(context.Background(), sb); err != nil {
		f.t.Fatalf("Sandbox %s status: %v", name, err)
	}
}

func (f *fixture) get(name string) *warrenv1.Sandbox {
	f.t.Helper()
	var sb warrenv1.Sandbox
	if err := f.c.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: name}, &sb); err != nil {
		f.t.Fatalf("Sandbox %s: %v", name, err)
	}
	return &sb
}

// running is a controller a test started.
type running struct {
	cancel  context.CancelFunc
	done    chan error
	stopped sync.Once
}

// stop ends the controller and waits for Run to return (once: a test may
// stop it before its cleanup does).
func (r *running) stop(t *testing.T) {
	t.Helper()
	r.stopped.Do(func() {
		r.cancel()
		select {
		case err := <-r.done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("Run did not return 30s after its context ended")
		}
	})
}

// start runs a controller in the fixture's namespace until the test ends,
// with election timings short enough for a test.
func (f *fixture) start(identity string, edits ...func(*controller.Options)) *running {
	f.t.Helper()
	opts := controller.Options{
		Config: plane.Get(f.t).Config, Namespace: f.ns, Identity: identity,
		LeaseDuration: 2 * time.Second, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 200 * time.Millisecond,
		RetryMin: 200 * time.Millisecond, RetryMax: 2 * time.Second,
		// Not the test's log: controller-runtime keeps the first
		// controller's logger for the process.
		Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	for _, edit := range edits {
		edit(&opts)
	}
	c, err := controller.New(opts)
	if err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- c.Run(ctx) }()
	f.t.Cleanup(func() { r.stop(f.t) })
	return r
}

// eventually polls cond every 10ms until it holds or timeout passes.
func (f *fixture) eventually(timeout time.Duration, what string, cond func() bool) {
	f.t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			f.t.Fatalf("after %v: %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// placed waits until every named sandbox has a node and its Placed
// condition (written just after), and returns the nodes.
func (f *fixture) placed(names ...string) map[string]string {
	f.t.Helper()
	out := map[string]string{}
	f.eventually(30*time.Second, "sandboxes placed: "+strings.Join(names, ", "), func() bool {
		for _, n := range names {
			sb := f.get(n)
			if sb.Spec.NodeName == "" || !meta.IsStatusConditionTrue(sb.Status.Conditions, warrenv1.SandboxPlaced) {
				return false
			}
			out[n] = sb.Spec.NodeName
		}
		return true
	})
	return out
}
