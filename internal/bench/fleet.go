//go:build kube

package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"syscall"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warrenv1 "github.com/warrenhq/warren/apis/warren/v1alpha1"
	warren "github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/kube/controller"
	"github.com/warrenhq/warren/internal/kube/fleet"
)

// RunFleet starts a throwaway fleet, measures it and takes it down again
// (also when a measurement fails or ctx ends).
func RunFleet(ctx context.Context, o FleetOptions) (_ *FleetReport, retErr error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	f, err := startFleet(ctx, o)
	if err != nil {
		return nil, err
	}
	defer func() { retErr = errors.Join(retErr, f.close()) }()
	rep := &FleetReport{Machine: machine(), Nodes: len(f.nodes),
		Controller: "the gateway's (warren gateway --controllers, leader-elected)",
		Targets:    FleetTargets{CreateAddedP50Ms: 3, ExecAddedP50Ms: 0.5, LostAfterKillMs: float64((o.Lease + 2*time.Second).Milliseconds())}}
	gw := f.clientOf(f.gateway.addr)
	direct := []*warren.Client{}
	for _, n := range f.nodes {
		direct = append(direct, f.clientOf(n.addr))
	}
	if err := f.waitKeySynced(ctx, direct); err != nil {
		return nil, err
	}
	if rep.Create, err = measureCreates(ctx, o, gw, direct); err != nil {
		return nil, err
	}
	planes := [2]envdPlane{
		{hc: &http.Client{}, addr: f.gateway.addr, key: f.key},
		{hc: &http.Client{}, addr: f.nodes[0].addr, key: f.key},
	}
	if err := measureCalls(ctx, o, gw, direct[0], planes, rep); err != nil {
		return nil, err
	}
	if rep.NodeLoss, err = f.measureNodeLoss(ctx, direct[len(direct)-1]); err != nil {
		return nil, err
	}
	return rep, nil
}

func (o *FleetOptions) check() error {
	switch {
	case o.Nodes < 2:
		return fmt.Errorf("the fleet suite needs at least 2 nodes, got %d", o.Nodes)
	case o.Creates <= 0 || o.Execs <= 0 || o.LostSandboxes <= 0:
		return fmt.Errorf("the fleet suite needs at least one of each sample (creates %d, execs %d, lost sandboxes %d)", o.Creates, o.Execs, o.LostSandboxes)
	case o.Lease < time.Second:
		return fmt.Errorf("fleet lease %s: want at least 1s", o.Lease)
	case o.Binary == "":
		return errors.New("the fleet suite needs the path of the warren binary")
	case os.Geteuid() != 0:
		return errors.New("the fleet suite runs node daemons, which need root")
	}
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Namespace == "" {
		o.Namespace = fleet.DefaultNamespace
	}
	return nil
}

// clientOf calls addr with the fleet's admin key, keeping its connections
// (as an agent's client would): the gateway and the nodes are timed alike.
func (f *benchFleet) clientOf(addr string) *warren.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 16
	return warren.New("http://"+addr, f.key, warren.WithHTTPClient(&http.Client{Transport: tr}))
}

// waitKeySynced waits until every node accepts the fleet's admin key (the
// nodes sync keys from their Secrets).
func (f *benchFleet) waitKeySynced(ctx context.Context, nodes []*warren.Client) error {
	for i, c := range nodes {
		err := pollUntil(ctx, 30*time.Second, func() bool {
			_, _, err := c.Sandboxes.List(ctx, warren.ListOptions{})
			return err == nil
		})
		if err != nil {
			return fmt.Errorf("node %s accepting the fleet's admin key: %w", f.nodes[i].name, err)
		}
	}
	return nil
}

// measureCreates times creates through the gateway and directly on the
// nodes in turn, one of each alternately; each sandbox is deleted, untimed.
func measureCreates(ctx context.Context, o FleetOptions, gw *warren.Client, nodes []*warren.Client) (FleetPair, error) {
	var viaGW, viaNode []time.Duration
	create := func(c *warren.Client) (time.Duration, error) {
		start := time.Now()
		sb, err := c.Sandboxes.Create(ctx, warren.NewSandbox{TemplateID: "bb"})
		took := time.Since(start)
		if err != nil {
			return 0, fmt.Errorf("create: %w", err)
		}
		if err := c.Sandboxes.Delete(ctx, sb.SandboxID); err != nil {
			return 0, fmt.Errorf("delete %s: %w", sb.SandboxID, err)
		}
		return took, nil
	}
	// One untimed round first: the first calls open connections.
	for i := -1; i < o.Creates; i++ {
		g, err := create(gw)
		if err != nil {
			return FleetPair{}, fmt.Errorf("through the gateway: %w", err)
		}
		d, err := create(nodes[(i+1)%len(nodes)])
		if err != nil {
			return FleetPair{}, fmt.Errorf("directly: %w", err)
		}
		if i >= 0 {
			viaGW, viaNode = append(viaGW, g), append(viaNode, d)
		}
	}
	return pairOf(viaGW, viaNode), nil
}

// measureCalls times execs of `true` and GETs of one sandbox on node,
// through the gateway and directly, alternately.
// The same `true` is also run the E2B SDK's way, on the sandbox plane
// (planes: the gateway's, the node's).
func measureCalls(ctx context.Context, o FleetOptions, gw, node *warren.Client, planes [2]envdPlane, rep *FleetReport) (err error) {
	sb, err := node.Sandboxes.Create(ctx, warren.NewSandbox{TemplateID: "bb"})
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	defer func() {
		if derr := node.Sandboxes.Delete(context.WithoutCancel(ctx), sb.SandboxID); derr != nil {
			err = errors.Join(err, fmt.Errorf("delete %s: %w", sb.SandboxID, derr))
		}
	}()
	exec := func(c *warren.Client) (time.Duration, error) {
		start := time.Now()
		res, err := c.Commands.ExecWait(ctx, sb.SandboxID, warren.ExecRequest{Command: "true"})
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("exit code %d", res.ExitCode)
		}
		return time.Since(start), err
	}
	get := func(c *warren.Client) (time.Duration, error) {
		start := time.Now()
		_, err := c.Sandboxes.Get(ctx, sb.SandboxID)
		return time.Since(start), err
	}
	// The gateway finds a sandbox it did not create through the Sandbox
	// object (or by asking the nodes): the warm-up calls wait for that.
	if err := pollUntil(ctx, 30*time.Second, func() bool { _, err := get(gw); return err == nil }); err != nil {
		return fmt.Errorf("the gateway finding sandbox %s: %w", sb.SandboxID, err)
	}
	if rep.ExecTrue, err = alternate(o.Execs, gw, node, exec); err != nil {
		return fmt.Errorf("exec of true: %w", err)
	}
	for i := range planes {
		planes[i].sandID, planes[i].token = sb.SandboxID, sb.EnvdAccessToken
	}
	envd := func(p *envdPlane) (time.Duration, error) { return p.execTrue(ctx) }
	if rep.ExecTrueEnvd, err = alternate(o.Execs, &planes[0], &planes[1], envd); err != nil {
		return fmt.Errorf("process.Process/Start of true: %w", err)
	}
	if rep.GetSandbox, err = alternate(o.Execs, gw, node, get); err != nil {
		return fmt.Errorf("GET of the sandbox: %w", err)
	}
	return nil
}

// alternate times call n times through the gateway and n times directly,
// one of each in turn, after a few untimed rounds.
func alternate[T any](n int, gw, node T, call func(T) (time.Duration, error)) (FleetPair, error) {
	const warmup = 5
	var viaGW, viaNode []time.Duration
	for i := -warmup; i < n; i++ {
		g, err := call(gw)
		if err != nil {
			return FleetPair{}, fmt.Errorf("through the gateway: %w", err)
		}
		d, err := call(node)
		if err != nil {
			return FleetPair{}, fmt.Errorf("directly: %w", err)
		}
		if i >= 0 {
			viaGW, viaNode = append(viaGW, g), append(viaNode, d)
		}
	}
	return pairOf(viaGW, viaNode), nil
}

// pairOf summarises both sides and what the gateway adds.
func pairOf(viaGW, viaNode []time.Duration) FleetPair {
	p := FleetPair{Gateway: Summarise(viaGW), Direct: Summarise(viaNode)}
	p.AddedP50 = round3(p.Gateway.P50 - p.Direct.P50)
	p.AddedP99 = round3(p.Gateway.P99 - p.Direct.P99)
	if p.Direct.P50 > 0 {
		p.RatioP50 = round3(p.Gateway.P50 / p.Direct.P50)
	}
	if p.Direct.P99 > 0 {
		p.RatioP99 = round3(p.Gateway.P99 / p.Direct.P99)
	}
	return p
}

// measureNodeLoss starts sandboxes on the last node, kills its daemon with
// SIGKILL and times each Sandbox object's turn to Lost from the Lease's
// expiry and from the kill.
func (f *benchFleet) measureNodeLoss(ctx context.Context, node *warren.Client) (NodeLoss, error) {
	victim := f.nodes[len(f.nodes)-1]
	loss := NodeLoss{LeaseSeconds: f.o.Lease.Seconds(), Sandboxes: f.o.LostSandboxes}
	var names []string
	for range f.o.LostSandboxes {
		sb, err := node.Sandboxes.Create(ctx, warren.NewSandbox{TemplateID: "bb"})
		if err != nil {
			return loss, fmt.Errorf("create on %s: %w", victim.name, err)
		}
		names = append(names, sb.SandboxID)
	}
	for _, name := range names {
		var o warrenv1.Sandbox
		err := pollUntil(ctx, 30*time.Second, func() bool {
			return f.env.Client.Get(ctx, client.ObjectKey{Namespace: f.o.Namespace, Name: name}, &o) == nil &&
				o.Status.Phase == warrenv1.SandboxRunning
		})
		if err != nil {
			return loss, fmt.Errorf("the Sandbox object of %s Running: %w", name, err)
		}
	}
	killed := time.Now()
	victim.kill(syscall.SIGKILL)
	// A renewal the node sent just before it died may land a moment later.
	time.Sleep(100 * time.Millisecond)
	var lease coordinationv1.Lease
	if err := f.env.Client.Get(ctx, client.ObjectKey{Namespace: f.o.Namespace, Name: fleet.LeaseName(victim.name)}, &lease); err != nil {
		return loss, fmt.Errorf("the Lease of %s: %w", victim.name, err)
	}
	expiry, ok := controller.LeaseExpiry(&lease)
	if !ok {
		return loss, fmt.Errorf("the Lease of %s has no renew time or duration", victim.name)
	}
	afterExpiry, afterKill, err := f.waitLost(ctx, names, expiry, killed)
	if err != nil {
		return loss, err
	}
	loss.AfterExpiry, loss.AfterKill = Summarise(afterExpiry), Summarise(afterKill)
	return loss, nil
}

// waitLost polls the Sandbox objects named until each reads Lost and
// returns when each did, counted from expiry and from killed.
func (f *benchFleet) waitLost(ctx context.Context, names []string, expiry, killed time.Time) (afterExpiry, afterKill []time.Duration, _ error) {
	pending := map[string]bool{}
	for _, n := range names {
		pending[n] = true
	}
	err := pollUntil(ctx, f.o.Lease+time.Minute, func() bool {
		var l warrenv1.SandboxList
		if err := f.env.Client.List(ctx, &l, client.InNamespace(f.o.Namespace)); err != nil {
			return false
		}
		now := time.Now()
		for _, o := range l.Items {
			if pending[o.Name] && o.Status.Phase == warrenv1.SandboxLost {
				delete(pending, o.Name)
				// Before the expiry would be a premature mark: reported
				// as negative, not hidden.
				afterExpiry = append(afterExpiry, now.Sub(expiry))
				afterKill = append(afterKill, now.Sub(killed))
			}
		}
		return len(pending) == 0
	})
	if err != nil {
		return nil, nil, fmt.Errorf("the sandboxes of the killed node turning Lost (%d left): %w", len(pending), err)
	}
	return afterExpiry, afterKill, nil
}
