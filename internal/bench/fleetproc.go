//go:build kube

package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	warrenv1 "github.com/warrenhq/warren/apis/warren/v1alpha1"
	"github.com/warrenhq/warren/internal/ids"
	"github.com/warrenhq/warren/internal/kube/fleet"
	"github.com/warrenhq/warren/internal/kube/kubetest"
	"github.com/warrenhq/warren/internal/testutil"
)

// benchFleet is the fleet suite's throwaway fleet on this machine: a control
// plane (envtest's etcd and kube-apiserver), node daemons in node mode and a
// gateway (which runs the node-loss controller), each a child process of
// this binary listening on loopback.
type benchFleet struct {
	o          FleetOptions
	dir        string // every data directory and the kubeconfig are under it
	env        *kubetest.Env
	kubeconfig string
	nodes      []*fleetProc
	gateway    *fleetProc
	key        string // the fleet's admin key
}

// fleetProc is one node daemon or the gateway.
type fleetProc struct {
	name         string
	addr         string
	dataDir      string // empty for the gateway
	cgroupParent string
	cmd          *exec.Cmd
	exited       chan struct{}
	log          *testutil.SyncBuffer
}

// startFleet starts the fleet; on error what it started is stopped again.
func startFleet(ctx context.Context, o FleetOptions) (_ *benchFleet, retErr error) {
	if os.Getenv(kubetest.AssetsEnv) == "" {
		// kubetest reads the variable; its error for a missing binary says
		// `make envtest`.
		os.Setenv(kubetest.AssetsEnv, filepath.Join(o.CacheDir, "envtest", "k8s-"+EnvtestVersion))
	}
	if _, err := os.Stat(kubetest.CRDDir()); err != nil {
		return nil, fmt.Errorf("the fleet suite installs warren's CRDs from the source tree this binary was built in (%s): %w", kubetest.CRDDir(), err)
	}
	dir, err := os.MkdirTemp("", "warren-bench-fleet-")
	if err != nil {
		return nil, err
	}
	f := &benchFleet{o: o, dir: dir}
	defer func() {
		if retErr != nil {
			retErr = errors.Join(retErr, f.close())
		}
	}()
	begin := time.Now()
	if f.env, err = kubetest.Launch(); err != nil {
		return f, fmt.Errorf("control plane: %w", err)
	}
	o.Log.Info("fleet: control plane up", "took", time.Since(begin))
	if err := f.prepareCluster(ctx); err != nil {
		return f, err
	}
	for i := range o.Nodes {
		n, err := f.startNode(ctx, fmt.Sprintf("node-%c", 'a'+i))
		if err != nil {
			return f, err
		}
		f.nodes = append(f.nodes, n)
	}
	if err := f.waitNodesReady(ctx); err != nil {
		return f, err
	}
	if f.key, err = f.adminKey(ctx); err != nil {
		return f, err
	}
	if f.gateway, err = f.startGateway(ctx); err != nil {
		return f, err
	}
	o.Log.Info("fleet: up", "nodes", len(f.nodes), "took", time.Since(begin))
	return f, nil
}

// prepareCluster writes the kubeconfig the children use and makes the
// namespace and the Node objects (envtest runs no kubelet).
func (f *benchFleet) prepareCluster(ctx context.Context) error {
	f.kubeconfig = filepath.Join(f.dir, "kubeconfig")
	if err := f.env.WriteKubeconfig(f.kubeconfig); err != nil {
		return err
	}
	if err := f.env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.o.Namespace}}); err != nil {
		return fmt.Errorf("namespace %s: %w", f.o.Namespace, err)
	}
	for i := range f.o.Nodes {
		name := fmt.Sprintf("node-%c", 'a'+i)
		if err := f.env.Client.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
			return fmt.Errorf("node %s: %w", name, err)
		}
	}
	return nil
}

// startNode runs `warren serve` in node mode on a data directory of its own
// and builds the busybox template bb there.
func (f *benchFleet) startNode(ctx context.Context, name string) (*fleetProc, error) {
	dataDir := filepath.Join(f.dir, name)
	if err := os.Mkdir(dataDir, 0o700); err != nil {
		return nil, err
	}
	addr, err := freeLoopback()
	if err != nil {
		return nil, err
	}
	n := &fleetProc{name: name, addr: addr, dataDir: dataDir, cgroupParent: "warren-bench-" + ids.New(8)}
	err = n.start(ctx, f.o.Binary, "serve", "--data-dir", dataDir, "--listen", addr, "--image-size-gb", "4",
		"--build-base=false", "--cache-dir", f.o.CacheDir, "--cgroup-parent", n.cgroupParent,
		"--cluster", "kubernetes", "--kubeconfig", f.kubeconfig, "--kube-namespace", f.o.Namespace,
		"--node-name", name, "--lease-duration", f.o.Lease.String())
	if err != nil {
		return nil, errors.Join(err, n.close(f.o.Binary, f.o.Log))
	}
	key, err := os.ReadFile(filepath.Join(dataDir, "admin.key"))
	if err == nil {
		build := exec.CommandContext(ctx, f.o.Binary, "template", "build", "bb", "--busybox", "--data-dir", dataDir)
		build.Env = append(os.Environ(), "WARREN_URL=http://"+addr, "WARREN_API_KEY="+strings.TrimSpace(string(key)))
		var out []byte
		if out, err = build.CombinedOutput(); err != nil {
			err = fmt.Errorf("template build bb on %s: %w\n%s", name, err, out)
		}
	}
	if err != nil {
		return nil, errors.Join(err, n.close(f.o.Binary, f.o.Log))
	}
	return n, nil
}

// startGateway runs `warren gateway` and waits for its /health.
func (f *benchFleet) startGateway(ctx context.Context) (*fleetProc, error) {
	addr, err := freeLoopback()
	if err != nil {
		return nil, err
	}
	g := &fleetProc{name: "gateway", addr: addr}
	if err := g.start(ctx, f.o.Binary, "gateway", "--listen", addr, "--kubeconfig", f.kubeconfig, "--kube-namespace", f.o.Namespace); err != nil {
		return nil, errors.Join(err, g.close(f.o.Binary, f.o.Log))
	}
	return g, nil
}

// waitNodesReady waits until every node's WarrenNode is Ready with bb.
func (f *benchFleet) waitNodesReady(ctx context.Context) error {
	for _, n := range f.nodes {
		var wn warrenv1.WarrenNode
		err := pollUntil(ctx, time.Minute, func() bool {
			return f.env.Client.Get(ctx, types.NamespacedName{Name: n.name}, &wn) == nil &&
				meta.IsStatusConditionTrue(wn.Status.Conditions, warrenv1.NodeReady) && slices.Contains(wn.Status.Templates, "bb")
		})
		if err != nil {
			return fmt.Errorf("WarrenNode %s Ready with template bb: %w\nits log:\n%s", n.name, err, logTail(n.log.String()))
		}
	}
	return nil
}

// adminKey reads the fleet's admin key from its Secret.
func (f *benchFleet) adminKey(ctx context.Context) (string, error) {
	var s corev1.Secret
	err := pollUntil(ctx, 30*time.Second, func() bool {
		return f.env.Client.Get(ctx, types.NamespacedName{Namespace: f.o.Namespace, Name: fleet.FleetAdminSecret}, &s) == nil && len(s.Data["key"]) > 0
	})
	if err != nil {
		return "", fmt.Errorf("the fleet's admin key (Secret %s): %w", fleet.FleetAdminSecret, err)
	}
	return strings.TrimSpace(string(s.Data["key"])), nil
}

// close stops the gateway and the nodes, tears down each
// node's data directory (its sandboxes, cgroups and pool), stops the
// control plane and removes the temporary directory.
func (f *benchFleet) close() error {
	var errs []error
	if f.gateway != nil {
		errs = append(errs, f.gateway.close(f.o.Binary, f.o.Log))
	}
	for _, n := range f.nodes {
		errs = append(errs, n.close(f.o.Binary, f.o.Log))
	}
	if f.env != nil {
		if err := f.env.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stopping the control plane: %w", err))
		}
	}
	if err := RemoveDataDir(f.dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// start runs this binary with args and waits until the child answers
// /health on its address; it fails at once if the child exits first.
func (p *fleetProc) start(ctx context.Context, bin string, args ...string) error {
	p.log = &testutil.SyncBuffer{}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	// Its own process group: a terminal's ^C reaches the bench alone, which
	// stops the children in order and tears their data down.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		p.cmd = nil
		return fmt.Errorf("%s: %w", p.name, err)
	}
	p.exited = make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) { _ = cmd.Wait(); close(exited) }(p.cmd, p.exited)
	hc := &http.Client{Timeout: 2 * time.Second}
	err := pollUntil(ctx, time.Minute, func() bool {
		select {
		case <-p.exited:
			return true
		default:
		}
		resp, err := hc.Get("http://" + p.addr + "/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	select {
	case <-p.exited:
		return fmt.Errorf("%s exited at start (%s):\n%s", p.name, p.cmd.ProcessState, logTail(p.log.String()))
	default:
	}
	if err != nil {
		return fmt.Errorf("%s's /health on %s: %w\n%s", p.name, p.addr, err, logTail(p.log.String()))
	}
	return nil
}

// kill ends the child with sig, and with SIGKILL after 15 s.
func (p *fleetProc) kill(sig syscall.Signal) {
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.exited:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// close stops the child and, for a node, runs `warren teardown` on its data
// directory: sandboxes outlive their daemon by design, and a killed node's
// are still running.
func (p *fleetProc) close(bin string, log *slog.Logger) error {
	p.kill(syscall.SIGTERM)
	if p.dataDir == "" {
		return nil
	}
	teardown := exec.Command(bin, "teardown", "--yes", "--data-dir", p.dataDir)
	teardown.Env = append(os.Environ(), "WARREN_CGROUP_PARENT="+p.cgroupParent)
	if out, err := teardown.CombinedOutput(); err != nil {
		return fmt.Errorf("teardown of %s (%s): %w\n%s", p.name, p.dataDir, err, out)
	}
	log.Debug("fleet: torn down", "node", p.name)
	return nil
}

// pollUntil calls ok every 20 ms until it holds, ctx ends or limit passes.
func pollUntil(ctx context.Context, limit time.Duration, ok func() bool) error {
	deadline := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %s", limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// logTail keeps the end of a child's log, where a failure says why.
func logTail(s string) string {
	const keep = 4000
	if len(s) > keep {
		return "…" + s[len(s)-keep:]
	}
	return s
}
