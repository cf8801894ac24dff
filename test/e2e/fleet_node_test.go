package e2e

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	warrenv1 "github.com/warrenhq/warren/apis/warren/v1alpha1"
	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/kube/fleet"
	"github.com/warrenhq/warren/internal/kube/kubetest"
	"github.com/warrenhq/warren/internal/store"
)

// fleetNode is a real daemon in node mode against a real control plane.
type fleetNode struct {
	*daemon
	env  *kubetest.Env
	name string
}

// startFleetNode starts a control plane, makes the namespace warren and
// starts a daemon (with the busybox template bb) in node mode against it.
func startFleetNode(t *testing.T, name string) *fleetNode {
	t.Helper()
	env := kubetest.Start(t)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fleet.DefaultNamespace}}
	if err := env.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := env.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	d := busyboxDaemon(t, "--cluster", "kubernetes", "--kubeconfig", kubeconfig, "--node-name", name, "--lease-duration", "6s")
	return &fleetNode{daemon: d, env: env, name: name}
}

func (n *fleetNode) sandboxObject(t *testing.T, name string) (warrenv1.Sandbox, bool) {
	t.Helper()
	var o warrenv1.Sandbox
	err := n.env.Client.Get(context.Background(), types.NamespacedName{Namespace: fleet.DefaultNamespace, Name: name}, &o)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return o, err == nil
}

// A daemon in node mode publishes its Lease and WarrenNode, mirrors the
// sandboxes made through its API as Sandbox objects, runs a Sandbox object
// assigned to it, and authenticates a key Secret.
func TestFleetNode(t *testing.T) {
	n := startFleetNode(t, "e2e-node")
	ctx := ctxT(t, 4*time.Minute)
	kc := n.env.Client

	var lease coordinationv1.Lease
	if err := kc.Get(ctx, types.NamespacedName{Namespace: fleet.DefaultNamespace, Name: fleet.LeaseName(n.name)}, &lease); err != nil {
		t.Fatalf("Lease: %v\n%s", err, n.log)
	}
	if !strings.HasPrefix(*lease.Spec.HolderIdentity, n.name+"_") || *lease.Spec.LeaseDurationSeconds != 6 {
		t.Fatalf("Lease %+v", lease.Spec)
	}
	var wn warrenv1.WarrenNode
	waitFor(t, 30*time.Second, "the WarrenNode, Ready, listing template bb", func() bool {
		return kc.Get(ctx, types.NamespacedName{Name: n.name}, &wn) == nil && len(wn.Status.Conditions) == 1 &&
			wn.Status.Conditions[0].Status == metav1.ConditionTrue && strings.Contains(strings.Join(wn.Status.Templates, ","), "bb")
	})
	if wn.Status.Endpoint != "http://"+n.addr || wn.Status.Capacity.Memory.IsZero() || len(wn.Status.Runtimes) == 0 {
		t.Fatalf("WarrenNode status %+v", wn.Status)
	}

	t.Run("api sandbox", func(t *testing.T) { fleetAPISandbox(t, ctx, n) })
	t.Run("applied object", func(t *testing.T) { fleetAppliedSandbox(t, ctx, n) })
	t.Run("key secret", func(t *testing.T) { fleetKeySecret(t, ctx, n) })
	t.Run("sandbox pool", func(t *testing.T) { fleetSandboxPool(t, ctx, n) })
}

// A SandboxPool object gives the node a warm pool: it fills, the node
// writes its line in the pool's status, and a create is served from it.
func fleetSandboxPool(t *testing.T, ctx context.Context, n *fleetNode) {
	sp := warrenv1.SandboxPool{ObjectMeta: metav1.ObjectMeta{Name: "bb", Namespace: fleet.DefaultNamespace},
		Spec: warrenv1.SandboxPoolSpec{Template: "bb", MinPerNode: 1}}
	if err := n.env.Client.Create(ctx, &sp); err != nil {
		t.Fatal(err)
	}
	key := types.NamespacedName{Namespace: fleet.DefaultNamespace, Name: "bb"}
	waitFor(t, 30*time.Second, "the pool's status line of the node, one ready", func() bool {
		if err := n.env.Client.Get(ctx, key, &sp); err != nil {
			t.Fatal(err)
		}
		return len(sp.Status.Nodes) == 1 && sp.Status.Nodes[0].Node == n.name && sp.Status.Nodes[0].Ready == 1
	})
	c := n.client()
	if _, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb"}); err != nil {
		t.Fatal(err)
	}
	pools, err := c.Pools.List(ctx)
	if err != nil || len(pools) != 1 || pools[0].TemplateID != "bb" || pools[0].Hits != 1 {
		t.Fatalf("pools %+v %v", pools, err)
	}
}

// A sandbox made through the API gets its object (Running, labelled, with
// the finalizer); pausing shows Paused; killing it removes the object.
func fleetAPISandbox(t *testing.T, ctx context.Context, n *fleetNode) {
	c := n.client()
	sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb"})
	if err != nil {
		t.Fatal(err)
	}
	created := time.Now()
	var o warrenv1.Sandbox
	waitFor(t, 20*time.Second, "the sandbox's object, Running", func() bool {
		var ok bool
		o, ok = n.sandboxObject(t, sb.SandboxID)
		return ok && o.Status.Phase == warrenv1.SandboxRunning
	})
	t.Logf("the object was Running %s after the create answered", time.Since(created).Round(time.Millisecond))
	if o.Labels[fleet.LabelNode] != n.name || o.Labels[fleet.LabelSandboxID] != sb.SandboxID || o.Labels[fleet.LabelTeam] != "admin" ||
		o.Labels[fleet.LabelOrigin] != fleet.OriginAPI || o.Labels[fleet.LabelTemplate] != "bb" ||
		len(o.Finalizers) != 1 || o.Finalizers[0] != fleet.Finalizer || o.Status.Endpoint != "http://"+n.addr {
		t.Fatalf("object %+v %+v", o.ObjectMeta, o.Status)
	}
	if err := c.Lifecycle.Pause(ctx, sb.SandboxID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the object Paused", func() bool {
		o, _ := n.sandboxObject(t, sb.SandboxID)
		return o.Status.Phase == warrenv1.SandboxPaused
	})
	if err := c.Sandboxes.Delete(ctx, sb.SandboxID); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	waitFor(t, 20*time.Second, "the object gone", func() bool {
		_, ok := n.sandboxObject(t, sb.SandboxID)
		return !ok
	})
	t.Logf("the object was gone %s after the kill answered", time.Since(killed).Round(time.Millisecond))
}

// A Sandbox object applied with spec.nodeName runs a real sandbox that
// answers exec through the node's API; deleting the object kills it.
func fleetAppliedSandbox(t *testing.T, ctx context.Context, n *fleetNode) {
	o := warrenv1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Name: "applied", Namespace: fleet.DefaultNamespace},
		Spec:       warrenv1.SandboxSpec{Template: "bb", NodeName: n.name, Metadata: map[string]string{"purpose": "e2e"}},
	}
	if err := n.env.Client.Create(ctx, &o); err != nil {
		t.Fatal(err)
	}
	applied := time.Now()
	waitFor(t, 30*time.Second, "the applied object Running", func() bool {
		o, _ = n.sandboxObject(t, "applied")
		return o.Status.Phase == warrenv1.SandboxRunning && o.Status.SandboxID != ""
	})
	t.Logf("the applied object was Running %s after it was made", time.Since(applied).Round(time.Millisecond))
	id := o.Status.SandboxID
	if o.Labels[fleet.LabelOrigin] != fleet.OriginKube || o.Labels[fleet.LabelSandboxID] != id || len(o.Finalizers) != 1 {
		t.Fatalf("object %+v", o.ObjectMeta)
	}
	c := n.client()
	var out bytes.Buffer
	if _, err := c.Commands.Exec(ctx, id, client.ExecRequest{Command: "echo from-kube"}, &out, &out); err != nil {
		t.Fatalf("exec in the applied sandbox: %v", err)
	}
	if strings.TrimSpace(out.String()) != "from-kube" {
		t.Fatalf("exec printed %q", out.String())
	}
	detail, err := c.Sandboxes.Get(ctx, id)
	if err != nil || detail.Metadata["purpose"] != "e2e" {
		t.Fatalf("the sandbox: %+v %v", detail, err)
	}
	// A restarted daemon finds the sandbox it made for the object rather
	// than making a second one.
	n.stop(syscall.SIGTERM)
	n.start()
	time.Sleep(3 * time.Second)
	c = n.client()
	listed, _, err := c.Sandboxes.List(ctx, client.ListOptions{})
	if err != nil || len(listed) != 1 || listed[0].SandboxID != id {
		t.Fatalf("sandboxes after a restart: %+v %v", listed, err)
	}
	if err := n.env.Client.Delete(ctx, &o); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the applied object gone", func() bool {
		_, ok := n.sandboxObject(t, "applied")
		return !ok
	})
	var apiErr *client.Error
	if _, err := c.Sandboxes.Get(ctx, id); !errors.As(err, &apiErr) || apiErr.Code != http.StatusNotFound {
		t.Fatalf("the sandbox after its object was deleted: %v", err)
	}
}

// A key Secret made in the API server authenticates at the node.
func fleetKeySecret(t *testing.T, ctx context.Context, n *fleetNode) {
	plain, err := store.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	s := corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-key", Namespace: fleet.DefaultNamespace, Labels: map[string]string{fleet.LabelAPIKey: "true"}},
		Data: map[string][]byte{fleet.KeyDataHash: []byte(store.HashKey(plain)), fleet.KeyDataTeam: []byte("t1"),
			fleet.KeyDataName: []byte("e2e"), fleet.KeyDataPrefix: []byte(plain[:12])},
	}
	if err := n.env.Client.Create(ctx, &s); err != nil {
		t.Fatal(err)
	}
	c := client.New("http://"+n.addr, plain)
	waitFor(t, 20*time.Second, "the Secret's key to authenticate", func() bool {
		_, _, err := c.Sandboxes.List(ctx, client.ListOptions{})
		return err == nil
	})
}

// A wrong --cluster, or an API server that does not answer at start, stops
// warren serve with an error that says so.
func TestFleetNodeStartErrors(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	unreachable := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://127.0.0.1:1"}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
users: [{name: u, user: {}}]
current-context: c
`
	if err := os.WriteFile(kubeconfig, []byte(unreachable), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--cluster", "nomad"}, "--cluster \"nomad\": want kubernetes"},
		{[]string{"--cluster", "kubernetes", "--kubeconfig", kubeconfig, "--node-name", "n1"}, "reach the Kubernetes API server"},
	} {
		d := newDaemon(t, c.args...)
		if err := d.launch(); err == nil {
			t.Fatalf("%v: the daemon started", c.args)
		}
		if !strings.Contains(d.log.String(), c.want) {
			t.Errorf("%v: the daemon's error does not say %q:\n%s", c.args, c.want, d.log)
		}
	}
}

// A second daemon started with the --node-name of a live one fails at
// start, saying so, and leaves the first one's Lease to it.
func TestFleetNodeNameTaken(t *testing.T) {
	n := startFleetNode(t, "e2e-twice")
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := n.env.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	d := newDaemon(t, "--cluster", "kubernetes", "--kubeconfig", kubeconfig, "--node-name", n.name, "--lease-duration", "6s")
	if err := d.launch(); err == nil {
		t.Fatalf("a second daemon of node %s started", n.name)
	}
	if log := d.log.String(); !strings.Contains(log, "another warren daemon") || !strings.Contains(log, "--node-name") {
		t.Errorf("the second daemon's error does not say another daemon runs as the node:\n%s", log)
	}
	t.Logf("second daemon of %s refused in %s (Lease 6s)", n.name, time.Since(began).Round(time.Millisecond))
	var lease coordinationv1.Lease
	if err := n.env.Client.Get(t.Context(), types.NamespacedName{Namespace: fleet.DefaultNamespace, Name: fleet.LeaseName(n.name)}, &lease); err != nil {
		t.Fatal(err)
	}
	if time.Since(lease.Spec.RenewTime.Time) > 6*time.Second {
		t.Errorf("the first daemon's Lease is not renewed: %+v", lease.Spec)
	}
}
