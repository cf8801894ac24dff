package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/daemon"
	"github.com/warrenhq/warren/internal/network/fakenet"
	"github.com/warrenhq/warren/internal/template"
)

// The network suite. Everything runs on a fake host (internal/network/
// fakenet): the daemon's bridge, rules and resolver live in a throwaway
// namespace whose only uplink is a fake internet of namespaces, so no
// sandbox traffic can leave this machine.

// NetworkOptions tune the network suite.
type NetworkOptions struct {
	Options
	// Creates are the sandboxes created (and deleted) with the network on,
	// and as many with it off, interleaved.
	Creates int
	// Claims are creates served from warm pools: a networked pool and a
	// plain one, interleaved.
	Claims int
	// DownloadMB is the size of each download; Downloads how many are
	// made through a sandbox's network and between plain namespaces.
	DownloadMB int
	Downloads  int
	// PolicyRounds are live policy changes timed (each swaps which of two
	// addresses is allowed).
	PolicyRounds int
	Progress     io.Writer
}

// NetworkReport is the network suite's result.
type NetworkReport struct {
	Machine  string `json:"machine"`
	Storage  string `json:"storage"`
	Runtime  string `json:"runtime"`
	Template string `json:"template"`
	// CreateToFirstOutput: POST /sandboxes, then an exec of `echo`, until
	// its first byte of output, with no network (loopback only) and with
	// a network (allowOut of one address) made on the create path.
	CreateToFirstOutputOff Stats   `json:"create_to_first_output_network_off"`
	CreateToFirstOutputOn  Stats   `json:"create_to_first_output_network_on"`
	CreateAddedP50Ms       float64 `json:"create_network_added_p50_ms"`
	CreateAddedP99Ms       float64 `json:"create_network_added_p99_ms"`
	// PoolClaim: the same from warm pools: a plain pool, and a network
	// pool whose sandboxes have their namespace made ahead (the claim
	// applies the policy).
	PoolClaimOff         Stats          `json:"pool_claim_to_first_output_network_off"`
	PoolClaimOn          Stats          `json:"pool_claim_to_first_output_network_on"`
	PoolClaimAddedP50Ms  float64        `json:"pool_claim_network_added_p50_ms"`
	PoolClaimAddedP99Ms  float64        `json:"pool_claim_network_added_p99_ms"`
	PoolClaimAddedMet    bool           `json:"pool_claim_network_added_met"`
	PoolClaimAddedTarget float64        `json:"pool_claim_network_added_target_p50_ms"`
	Download             DownloadReport `json:"download"`
	PolicyChange         PolicyReport   `json:"policy_change"`
}

// PolicyReport times live policy changes (PUT /sandboxes/{id}/network) as a
// program in the sandbox sees them: from the start of the PUT until a new
// connection to the address it denies is refused, and until a new
// connection to the address it allows succeeds. The connections are made
// from the sandbox's network namespace (by the bench, about every
// millisecond), so the figures hold the rule change and the PUT's own path,
// not the time to start a program in the sandbox.
type PolicyReport struct {
	Rounds    int     `json:"rounds"`
	ProbeMs   float64 `json:"probe_interval_ms"`
	UntilDeny Stats   `json:"until_denied_refused"`
	UntilOpen Stats   `json:"until_allowed_connects"`
	PUT       Stats   `json:"put_round_trip"`
	TargetMs  float64 `json:"target_ms"`
	// Met: the p99 of both figures is within the target.
	Met bool `json:"met"`
}

// DownloadReport compares a download through a sandbox's network (its veth,
// warren's bridge, the egress rules, conntrack and NAT, the uplink) with the
// same download between two namespaces joined by a plain veth pair. The
// client is the same Go code in both, run in the sandbox's network
// namespace and in the plain one: what differs is the path only.
type DownloadReport struct {
	Bytes           int64     `json:"bytes"`
	SandboxMBps     []float64 `json:"sandbox_mb_per_s"`
	BaselineMBps    []float64 `json:"baseline_mb_per_s"`
	SandboxP50MBps  float64   `json:"sandbox_p50_mb_per_s"`
	BaselineP50MBps float64   `json:"baseline_p50_mb_per_s"`
	// Ratio is the median of the ratios of each pair of downloads (one
	// through the sandbox's network, then one between plain namespaces,
	// back to back): drift in the machine's speed over the run cancels.
	Ratio float64 `json:"ratio"`
	// BestRatio compares the fastest download of each kind.
	BestRatio float64 `json:"best_ratio"`
	Target    float64 `json:"target_ratio"`
	Met       bool    `json:"met"`
	// Routed: the same download across three plain namespaces (client →
	// router → server: two veth pairs and a routing hop, as many as a
	// sandbox's path crosses) without warren's bridge, rules, conntrack or
	// NAT: RoutedRatio is the share of warren's own layers.
	RoutedMBps     []float64 `json:"routed_mb_per_s"`
	RoutedP50MBps  float64   `json:"routed_p50_mb_per_s"`
	RoutedRatio    float64   `json:"ratio_vs_routed"`
	RoutedRatioMet bool      `json:"ratio_vs_routed_met"`
	// InSandboxNc: the same download by busybox nc inside the sandbox
	// (its own CPU limit and pipe included), as an exec, for reference.
	InSandboxNcMBps float64 `json:"in_sandbox_nc_mb_per_s,omitempty"`
}

// networkPoolTemplate is the template of the suite's warm pools (one of
// each kind), apart from the one its plain creates use.
const networkPoolTemplate = "bench-netpool"

// RunNetwork runs the network suite on a fake host it builds and removes.
func RunNetwork(ctx context.Context, opts NetworkOptions) (_ NetworkReport, retErr error) {
	opts.defaults()
	progress := opts.Progress
	if progress == nil {
		progress = io.Discard
	}
	netDir, err := os.MkdirTemp("", "warren-bench-net-")
	if err != nil {
		return NetworkReport{}, err
	}
	in, err := fakenet.New(netDir)
	if err != nil {
		os.RemoveAll(netDir)
		return NetworkReport{}, err
	}
	runDir := filepath.Join(netDir, "run")
	defer func() {
		// After the daemon (deferred below, so run first): its sandboxes'
		// namespaces are unmounted, then the fake host goes with
		// everything in it.
		retErr = errors.Join(retErr, fakenet.UnmountUnder(runDir), in.Close(), removeNetDir(netDir, runDir))
	}()

	h, err := startHarness(ctx, opts.Options, func(cfg *config.Config) {
		cfg.ImageSize = 4 << 30
		cfg.MaxSandboxes = 16
		cfg.Network.Enabled = true
		cfg.Network.NetNS = in.HostNS
		cfg.Network.Uplink = fakenet.UplinkName
		cfg.Network.DNS = fakenet.UpstreamDNS
		cfg.Network.RunDir = runDir
		cfg.Network.Subnet = "10.88.0.0/24"
		cfg.Pools = []string{networkPoolTemplate + "=1"}
		cfg.Network.Pools = []string{networkPoolTemplate + "=1"}
	})
	if err != nil {
		return NetworkReport{}, err
	}
	defer func() { retErr = errors.Join(retErr, h.close()) }()
	c := h.c
	rep := NetworkReport{Machine: machine(), Storage: h.d.Storage.Name(), Runtime: h.d.Runtime.Name(), Template: h.tmpl,
		PoolClaimAddedTarget: 5}
	rep.Download.Target = 0.8
	if _, err := h.d.Templates.Build(ctx, networkPoolTemplate, template.Source{Busybox: true}, daemon.BuildOptions{Replace: true}); err != nil {
		return rep, fmt.Errorf("build the pools' template: %w", err)
	}
	policy := &client.Network{AllowOut: []string{fakenet.Servers[0]}}

	fmt.Fprintf(progress, "network: %d creates with the network off and on\n", opts.Creates)
	if err := measureNetworkCreates(ctx, c, h.tmpl, policy, opts.Creates, &rep); err != nil {
		return rep, err
	}
	fmt.Fprintf(progress, "network: %d pool claims with the network off and on\n", opts.Claims)
	if err := measureNetworkClaims(ctx, c, policy, opts.Claims, &rep); err != nil {
		return rep, err
	}

	fmt.Fprintf(progress, "network: %d live policy changes\n", opts.PolicyRounds)
	if rep.PolicyChange, err = measurePolicyChanges(ctx, c, h.tmpl, runDir, opts.PolicyRounds); err != nil {
		return rep, fmt.Errorf("policy changes: %w", err)
	}

	fmt.Fprintf(progress, "network: %d downloads of %d MB through a sandbox's network and between plain namespaces\n", opts.Downloads, opts.DownloadMB)
	rep.Download, err = measureDownloads(ctx, h, in, runDir, int64(opts.DownloadMB)<<20, opts.Downloads)
	rep.Download.Target = 0.8
	rep.Download.Met = rep.Download.Ratio >= rep.Download.Target
	rep.Download.RoutedRatioMet = rep.Download.RoutedRatio >= rep.Download.Target
	return rep, err
}

// defaults fills in the network suite's sizes left at zero.
// removeNetDir removes the bench's fake host. A namespace mount may still be
// busy for a moment after the daemon's close (a sandbox's last process
// leaving), so a busy mount point is detached again and retried for a
// while rather than failing the run.
func removeNetDir(netDir, runDir string) error {
	var err error
	for try := 0; try < 20; try++ {
		if err = os.RemoveAll(netDir); err == nil || !errors.Is(err, unix.EBUSY) {
			return err
		}
		time.Sleep(250 * time.Millisecond)
		_ = fakenet.UnmountUnder(runDir)
	}
	return err
}

func (opts *NetworkOptions) defaults() {
	defaultSize(&opts.Creates, 30)
	defaultSize(&opts.Claims, 20)
	defaultSize(&opts.DownloadMB, 100)
	defaultSize(&opts.Downloads, 21)
	defaultSize(&opts.PolicyRounds, 30)
}

// measureNetworkCreates times creates to first output with the network off
// and on (policy), interleaved.
func measureNetworkCreates(ctx context.Context, c *client.Client, tmpl string, policy *client.Network, creates int, rep *NetworkReport) error {
	off, on, err := offAndOn(creates, func(withNet bool) (time.Duration, error) {
		req := client.NewSandbox{TemplateID: tmpl}
		if withNet {
			req.Network = policy
		}
		return createToFirstOutput(ctx, c, req, true)
	})
	if err != nil {
		return err
	}
	rep.CreateToFirstOutputOff, rep.CreateToFirstOutputOn = Summarise(off), Summarise(on)
	rep.CreateAddedP50Ms = rounded(rep.CreateToFirstOutputOn.P50 - rep.CreateToFirstOutputOff.P50)
	rep.CreateAddedP99Ms = rounded(rep.CreateToFirstOutputOn.P99 - rep.CreateToFirstOutputOff.P99)
	return nil
}

// measureNetworkClaims times creates served from the plain and the
// networked warm pool, interleaved, each checked to come from its pool, and
// waits for both pools to refill at the end.
func measureNetworkClaims(ctx context.Context, c *client.Client, policy *client.Network, claims int, rep *NetworkReport) error {
	off, on, err := offAndOn(claims, func(withNet bool) (time.Duration, error) {
		if err := untilPoolsReady(ctx, c, networkPoolTemplate); err != nil {
			return 0, err
		}
		req := client.NewSandbox{TemplateID: networkPoolTemplate}
		if withNet {
			req.Network = policy
		}
		before, err := c.Pools.List(ctx)
		if err != nil {
			return 0, err
		}
		d, err := createToFirstOutput(ctx, c, req, true)
		if err != nil {
			return 0, err
		}
		return d, claimedFromPool(ctx, c, before, withNet)
	})
	if err != nil {
		return err
	}
	rep.PoolClaimOff, rep.PoolClaimOn = Summarise(off), Summarise(on)
	rep.PoolClaimAddedP50Ms = rounded(rep.PoolClaimOn.P50 - rep.PoolClaimOff.P50)
	rep.PoolClaimAddedP99Ms = rounded(rep.PoolClaimOn.P99 - rep.PoolClaimOff.P99)
	rep.PoolClaimAddedMet = rep.PoolClaimAddedP50Ms <= rep.PoolClaimAddedTarget
	return untilPoolsReady(ctx, c, networkPoolTemplate)
}

// offAndOn runs measure n+1 times with the network off and then on; the
// first round warms caches and is not counted.
func offAndOn(n int, measure func(withNet bool) (time.Duration, error)) (off, on []time.Duration, _ error) {
	for i := range n + 1 {
		for _, withNet := range []bool{false, true} {
			d, err := measure(withNet)
			if err != nil {
				return nil, nil, err
			}
			if i == 0 {
				continue // warms caches
			}
			if withNet {
				on = append(on, d)
			} else {
				off = append(off, d)
			}
		}
	}
	return off, on, nil
}

// createToFirstOutput creates a sandbox, runs `echo` in it until its first
// byte of output, and (del) deletes it.
func createToFirstOutput(ctx context.Context, c *client.Client, in client.NewSandbox, del bool) (time.Duration, error) {
	start := time.Now()
	sb, err := c.Sandboxes.Create(ctx, in)
	if err != nil {
		return 0, fmt.Errorf("create: %w", err)
	}
	fw := &firstWrite{}
	if _, err := c.Commands.Exec(ctx, sb.SandboxID, client.ExecRequest{Cmd: []string{"echo", "ready"}}, fw, io.Discard); err != nil {
		return 0, fmt.Errorf("first exec: %w", err)
	}
	d := fw.at.Sub(start)
	if del {
		if err := c.Sandboxes.Delete(ctx, sb.SandboxID); err != nil {
			return 0, fmt.Errorf("delete: %w", err)
		}
	}
	return d, nil
}

// untilPoolsReady waits until every pool of tmpl has a ready sandbox.
func untilPoolsReady(ctx context.Context, c *client.Client, tmpl string) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		pools, err := c.Pools.List(ctx)
		if err != nil {
			return err
		}
		ready, last := true, ""
		for _, p := range pools {
			if p.TemplateID == tmpl && p.Ready == 0 {
				ready, last = false, p.LastFailure
			}
		}
		if ready {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the warm pools of %s did not refill: %s", tmpl, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// claimedFromPool checks that the create just made was a hit of the pool
// of its kind.
func claimedFromPool(ctx context.Context, c *client.Client, before []client.Pool, withNet bool) error {
	after, err := c.Pools.List(ctx)
	if err != nil {
		return err
	}
	hits := func(ps []client.Pool) int64 {
		for _, p := range ps {
			if p.TemplateID == networkPoolTemplate && p.Network == withNet {
				return p.Hits
			}
		}
		return -1
	}
	if hits(after) != hits(before)+1 {
		return fmt.Errorf("a create (network %v) was not served from its warm pool", withNet)
	}
	return nil
}

// measurePolicyChanges times rounds live policy changes of one sandbox,
// each swapping which of two upstream servers is allowed.
func measurePolicyChanges(ctx context.Context, c *client.Client, tmpl, runDir string, rounds int) (PolicyReport, error) {
	const interval = time.Millisecond
	rep := PolicyReport{Rounds: rounds, ProbeMs: float64(interval) / float64(time.Millisecond), TargetMs: 100}
	addrs := [2]string{fakenet.Servers[0], fakenet.Servers[1]}
	sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: tmpl, Network: &client.Network{AllowOut: addrs[:1]}})
	if err != nil {
		return rep, err
	}
	defer c.Sandboxes.Delete(context.WithoutCancel(ctx), sb.SandboxID)
	ns := filepath.Join(runDir, "netns", sb.SandboxID)
	var denied, opened, put []time.Duration
	for i := range rounds + 1 {
		// addrs[i%2] is allowed now; the change allows the other.
		was, now := addrs[i%2], addrs[(i+1)%2]
		port := strconv.Itoa(fakenet.HTTPPort)
		t, err := fakenet.TimeChange(ctx, ns, net.JoinHostPort(was, port), net.JoinHostPort(now, port), interval, func() error {
			return c.Network.Update(ctx, sb.SandboxID, client.NetworkPolicy{AllowOut: []string{now}})
		})
		if err != nil {
			return rep, fmt.Errorf("round %d: %w", i, err)
		}
		if i == 0 {
			continue // warms caches
		}
		denied, opened, put = append(denied, t.Denied), append(opened, t.Allowed), append(put, t.Call)
	}
	rep.UntilDeny, rep.UntilOpen, rep.PUT = Summarise(denied), Summarise(opened), Summarise(put)
	rep.Met = rep.UntilDeny.P99 <= rep.TargetMs && rep.UntilOpen.P99 <= rep.TargetMs
	return rep, nil
}

// measureDownloads times downloads from the fake upstream through a
// sandbox's network against the same between two plain namespaces.
func measureDownloads(ctx context.Context, h *harness, in *fakenet.Internet, runDir string, size int64, n int) (DownloadReport, error) {
	rep := DownloadReport{Bytes: size}
	sb, err := h.c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: h.tmpl, Network: &client.Network{AllowOut: []string{fakenet.Servers[0]}}})
	if err != nil {
		return rep, err
	}
	defer h.c.Sandboxes.Delete(context.WithoutCancel(ctx), sb.SandboxID)
	sandboxNS := filepath.Join(runDir, "netns", sb.SandboxID)

	clientNS, serverAddr, err := plainPair(in)
	if err != nil {
		return rep, err
	}
	routedNS, routedAddr, err := routedPath(in)
	if err != nil {
		return rep, fmt.Errorf("routed baseline: %w", err)
	}
	upstream := net.JoinHostPort(fakenet.Servers[0], strconv.Itoa(fakenet.DownloadPort))
	var through, plain, routed, ratios, routedRatios []float64
	for i := range n + 1 {
		// Each trio back to back, in rotating order, so that drift in the
		// machine's speed falls on all three alike.
		var a, b, c time.Duration
		for j := range 3 {
			switch (i + j) % 3 {
			case 0:
				a, err = download(sandboxNS, upstream, size)
			case 1:
				b, err = download(clientNS, serverAddr, size)
			case 2:
				c, err = download(routedNS, routedAddr, size)
			}
			if err != nil {
				return rep, fmt.Errorf("download %d of kind %d: %w", i, (i+j)%3, err)
			}
		}
		if i > 0 {
			through, plain, routed = append(through, mbps(size, a)), append(plain, mbps(size, b)), append(routed, mbps(size, c))
			ratios = append(ratios, b.Seconds()/a.Seconds())
			routedRatios = append(routedRatios, c.Seconds()/a.Seconds())
		}
	}
	rep.SandboxMBps, rep.BaselineMBps, rep.RoutedMBps = through, plain, routed
	rep.SandboxP50MBps, rep.BaselineP50MBps, rep.RoutedP50MBps = median(through), median(plain), median(routed)
	rep.Ratio = rounded(median(ratios))
	rep.RoutedRatio = rounded(median(routedRatios))
	rep.BestRatio = rounded(slices.Max(through) / slices.Max(plain))

	// For reference: busybox nc in the sandbox.
	start := time.Now()
	res, err := h.c.Commands.ExecWait(ctx, sb.SandboxID, client.ExecRequest{
		Command: fmt.Sprintf("echo %d | timeout 120 nc %s %d | wc -c", size, fakenet.Servers[0], fakenet.DownloadPort)})
	if err == nil && res.ExitCode == 0 && res.Stdout == strconv.FormatInt(size, 10)+"\n" {
		rep.InSandboxNcMBps = mbps(size, time.Since(start))
	}
	return rep, nil
}

// plainPair makes two namespaces of the fake internet joined by a veth pair
// with a download server in one; it returns the other and the server's
// address.
func plainPair(in *fakenet.Internet) (string, string, error) {
	clientNS, err := in.NewNS("plain-client")
	if err != nil {
		return "", "", err
	}
	serverNS, err := in.NewNS("plain-server")
	if err != nil {
		return "", "", err
	}
	ch, err := netns.GetFromPath(clientNS)
	if err != nil {
		return "", "", err
	}
	defer ch.Close()
	sh, err := netns.GetFromPath(serverNS)
	if err != nil {
		return "", "", err
	}
	defer sh.Close()
	cl, err := netlink.NewHandleAt(ch)
	if err != nil {
		return "", "", err
	}
	defer cl.Close()
	sl, err := netlink.NewHandleAt(sh)
	if err != nil {
		return "", "", err
	}
	defer sl.Close()
	la := netlink.NewLinkAttrs()
	la.Name = "eth0"
	if err := cl.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: "eth0p", PeerNamespace: netlink.NsFd(sh)}); err != nil {
		return "", "", err
	}
	if err := bringUp([]linkSetup{{cl, "eth0", "10.99.0.1/30"}, {sl, "eth0p", "10.99.0.2/30"}, {cl, "lo", ""}, {sl, "lo", ""}}); err != nil {
		return "", "", err
	}
	addr := net.JoinHostPort("10.99.0.2", strconv.Itoa(fakenet.DownloadPort))
	if err := in.ServeDownload(serverNS, addr); err != nil {
		return "", "", err
	}
	return clientNS, addr, nil
}

// routedPath makes three plain namespaces, client → router → server, joined
// by veth pairs, with a download server in the last: a download from the
// client crosses as many links and one routing hop as a sandbox's download
// does (sandbox → fake host → upstream), without warren's bridge, rules,
// conntrack or NAT. It returns the client's namespace and the server's
// address.
func routedPath(in *fakenet.Internet) (string, string, error) {
	var paths [3]string
	for i, name := range []string{"routed-client", "routed-router", "routed-server"} {
		p, err := in.NewNS(name)
		if err != nil {
			return "", "", err
		}
		paths[i] = p
	}
	var handles [3]*netlink.Handle
	var nsFDs [3]netns.NsHandle
	for i, p := range paths {
		nsh, err := netns.GetFromPath(p)
		if err != nil {
			return "", "", err
		}
		defer nsh.Close()
		nsFDs[i] = nsh
		h, err := netlink.NewHandleAt(nsh)
		if err != nil {
			return "", "", err
		}
		defer h.Close()
		handles[i] = h
	}
	client, router, server := handles[0], handles[1], handles[2]
	// client eth0 10.98.1.2/30 — router c0 10.98.1.1/30; router s0
	// 10.98.2.1/30 — server eth0 10.98.2.2/30.
	for _, l := range []struct {
		h          *netlink.Handle
		name, peer string
		peerNS     netns.NsHandle
	}{
		{router, "c0", "eth0", nsFDs[0]},
		{router, "s0", "eth0", nsFDs[2]},
	} {
		la := netlink.NewLinkAttrs()
		la.Name = l.name
		if err := l.h.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: l.peer, PeerNamespace: netlink.NsFd(l.peerNS)}); err != nil {
			return "", "", err
		}
	}
	if err := bringUp([]linkSetup{
		{router, "c0", "10.98.1.1/30"}, {router, "s0", "10.98.2.1/30"}, {router, "lo", ""},
		{client, "eth0", "10.98.1.2/30"}, {client, "lo", ""},
		{server, "eth0", "10.98.2.2/30"}, {server, "lo", ""},
	}); err != nil {
		return "", "", err
	}
	if err := client.RouteAdd(&netlink.Route{Gw: net.ParseIP("10.98.1.1")}); err != nil {
		return "", "", err
	}
	if err := server.RouteAdd(&netlink.Route{Gw: net.ParseIP("10.98.2.1")}); err != nil {
		return "", "", err
	}
	// The router is a namespace of the bench's own: it forwards.
	if err := fakenet.InNS(paths[1], func() error {
		return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644)
	}); err != nil {
		return "", "", err
	}
	addr := net.JoinHostPort("10.98.2.2", strconv.Itoa(fakenet.DownloadPort))
	if err := in.ServeDownload(paths[2], addr); err != nil {
		return "", "", err
	}
	return paths[0], addr, nil
}

// linkSetup is an interface of a namespace to bring up, with an address
// ("" for none).
type linkSetup struct {
	h          *netlink.Handle
	name, addr string
}

func bringUp(links []linkSetup) error {
	for _, s := range links {
		l, err := s.h.LinkByName(s.name)
		if err != nil {
			return err
		}
		if s.addr != "" {
			a, err := netlink.ParseAddr(s.addr)
			if err != nil {
				return err
			}
			if err := s.h.AddrAdd(l, a); err != nil {
				return err
			}
		}
		if err := s.h.LinkSetUp(l); err != nil {
			return err
		}
	}
	return nil
}

// download fetches size bytes from addr with a connection made inside the
// namespace at nsPath (dialled on the namespace's thread; the reading may
// happen anywhere).
func download(nsPath, addr string, size int64) (time.Duration, error) {
	var conn net.Conn
	start := time.Now()
	if err := fakenet.InNS(nsPath, func() (err error) {
		conn, err = net.DialTimeout("tcp4", addr, 10*time.Second)
		return err
	}); err != nil {
		return 0, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Minute))
	if _, err := fmt.Fprintln(conn, size); err != nil {
		return 0, err
	}
	buf := make([]byte, 256<<10)
	var got int64
	for {
		n, err := conn.Read(buf)
		got += int64(n)
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, err
		}
	}
	d := time.Since(start)
	if got != size {
		return 0, fmt.Errorf("got %d bytes of %d", got, size)
	}
	return d, nil
}

func mbps(size int64, d time.Duration) float64 {
	return rounded(float64(size) / (1 << 20) / d.Seconds())
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// rounded keeps three decimals.
func rounded(f float64) float64 { return math.Round(f*1000) / 1000 }
