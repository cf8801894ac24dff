package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	warrenv1 "github.com/warrenhq/warren/apis/warren/v1alpha1"
	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/kube/fleet"
	"github.com/warrenhq/warren/internal/kube/kubetest"
	"github.com/warrenhq/warren/internal/testutil"
)

// A fleet on this machine: a real control plane (envtest's etcd and
// kube-apiserver), node daemons in node mode and gateway processes, all on
// loopback. Node objects are the test's (envtest has no kubelet).
type fleetT struct {
	t          *testing.T
	env        *kubetest.Env
	ns         string
	kubeconfig string
	nodes      []*fleetMember
	gateways   []*gatewayProc
}

// fleetMember is one node daemon and its name in the cluster.
type fleetMember struct {
	name string
	d    *daemon
}

// startFleet starts a control plane, nodes node daemons with the busybox
// template bb (named node-a, node-b, …) and gateways gateway processes, and
// waits until every node's WarrenNode is Ready.
func startFleet(t *testing.T, nodes, gateways int, nodeArgs ...string) *fleetT {
	t.Helper()
	testutil.RequireRoot(t)
	f := &fleetT{t: t, env: kubetest.Start(t), ns: "warren"}
	ctx := ctxT(t, 2*time.Minute)
	f.kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	if err := f.env.WriteKubeconfig(f.kubeconfig); err != nil {
		t.Fatal(err)
	}
	if err := f.env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns}}); err != nil {
		t.Fatal(err)
	}
	for i := range nodes {
		name := fmt.Sprintf("node-%c", 'a'+i)
		if err := f.env.Client.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
			t.Fatal(err)
		}
		args := append([]string{"--cluster", "kubernetes", "--kubeconfig", f.kubeconfig, "--kube-namespace", f.ns,
			"--node-name", name, "--lease-duration", "4s"}, nodeArgs...)
		f.nodes = append(f.nodes, &fleetMember{name: name, d: busyboxDaemon(t, args...)})
	}
	for _, m := range f.nodes {
		var wn warrenv1.WarrenNode
		waitFor(t, time.Minute, "WarrenNode "+m.name+" Ready with template bb", func() bool {
			return f.env.Client.Get(ctx, types.NamespacedName{Name: m.name}, &wn) == nil &&
				meta.IsStatusConditionTrue(wn.Status.Conditions, warrenv1.NodeReady) && slices.Contains(wn.Status.Templates, "bb")
		})
	}
	for range gateways {
		f.gateways = append(f.gateways, f.startGateway())
	}
	return f
}

// gatewayProc is one `warren gateway` process.
type gatewayProc struct {
	t    *testing.T
	addr string
	cmd  *exec.Cmd
	log  *testutil.SyncBuffer
	done chan struct{}
}

// startGateway runs `warren gateway` on a free loopback port and waits for
// its /health.
func (f *fleetT) startGateway() *gatewayProc {
	t := f.t
	t.Helper()
	g := &gatewayProc{t: t, addr: freePort(t), log: &testutil.SyncBuffer{}, done: make(chan struct{})}
	g.cmd = exec.Command(filepath.Join(binDir(t), "warren"), "gateway", "--listen", g.addr,
		"--kubeconfig", f.kubeconfig, "--kube-namespace", f.ns)
	g.cmd.Stdout, g.cmd.Stderr = g.log, g.log
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.cmd.Wait(); close(g.done) }()
	t.Cleanup(func() {
		g.kill(syscall.SIGTERM)
		if t.Failed() {
			t.Logf("gateway %s log:\n%s", g.addr, g.log.String())
		}
	})
	waitFor(t, time.Minute, "the gateway's /health", func() bool {
		select {
		case <-g.done:
			t.Fatalf("the gateway exited at start:\n%s", g.log.String())
		default:
		}
		resp, err := http.Get("http://" + g.addr + "/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return g
}

// kill ends the gateway with sig and waits for it.
func (g *gatewayProc) kill(sig syscall.Signal) {
	_ = g.cmd.Process.Signal(sig)
	select {
	case <-g.done:
	case <-time.After(15 * time.Second):
		_ = g.cmd.Process.Kill()
		<-g.done
	}
}

// adminKey is the fleet's admin key (the Secret the first node made).
func (f *fleetT) adminKey(ctx context.Context) string {
	f.t.Helper()
	var s corev1.Secret
	waitFor(f.t, 30*time.Second, "the fleet's admin key", func() bool {
		return f.env.Client.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: fleet.FleetAdminSecret}, &s) == nil && len(s.Data["key"]) > 0
	})
	return strings.TrimSpace(string(s.Data["key"]))
}

// client reaches the fleet through gateway i with the fleet's admin key.
func (f *fleetT) client(ctx context.Context, i int) *client.Client {
	return client.New("http://"+f.gateways[i].addr, f.adminKey(ctx))
}

// patchNode merge-patches the Kubernetes Node name as kubectl cordon,
// uncordon and annotate do: only the fields named, so nothing else written
// to the Node meanwhile is lost.
func (f *fleetT) patchNode(ctx context.Context, name, patch string) {
	f.t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := f.env.Client.Patch(ctx, n, ctrlclient.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		f.t.Fatalf("patch Node %s with %s: %v", name, patch, err)
	}
}

// warrenNodeCondition is the condition typ of WarrenNode name (nil: none).
func (f *fleetT) warrenNodeCondition(ctx context.Context, name, typ string) *metav1.Condition {
	var wn warrenv1.WarrenNode
	if err := f.env.Client.Get(ctx, types.NamespacedName{Name: name}, &wn); err != nil {
		return nil
	}
	return meta.FindStatusCondition(wn.Status.Conditions, typ)
}

// sandboxPhase is the phase in the Sandbox object of id ("" while none).
func (f *fleetT) sandboxPhase(ctx context.Context, id string) warrenv1.SandboxPhase {
	var o warrenv1.Sandbox
	if err := f.env.Client.Get(ctx, types.NamespacedName{Namespace: f.ns, Name: id}, &o); err != nil {
		return ""
	}
	return o.Status.Phase
}
