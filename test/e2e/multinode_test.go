package e2e

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/network/fakenet"
	"github.com/warrenhq/warren/internal/testutil"
)

// neighbour is one of several daemons sharing one (fake) host: its own
// data directory, cgroup parent (the harness gives each daemon one),
// network run directory, subnet, bridge, nftables table, veth prefix and
// NFLOG group.
type neighbour struct {
	d                           *daemon
	runDir                      string
	subnet, bridge, table, veth string
	sb                          sandboxNet
}

// counts is what the neighbour's network has on the fake host.
func (n *neighbour) counts(t *testing.T, in *fakenet.Internet) fakenet.Counts {
	t.Helper()
	c, err := in.CountNamed(n.runDir, n.table, n.veth)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// startNeighbours starts three daemons on the fake host in. The first keeps
// every default name (bridge warren0, table warren, veths wrn*, NFLOG group
// 4269), as a single daemon has them; the others take their own.
func startNeighbours(t *testing.T, in *fakenet.Internet, dir string) []*neighbour {
	t.Helper()
	var ns []*neighbour
	for i := range 3 {
		n := &neighbour{runDir: filepath.Join(dir, fmt.Sprintf("run%d", i)), subnet: fmt.Sprintf("10.88.%d.0/24", i),
			bridge: "warren0", table: "warren", veth: "wrn"}
		args := []string{
			"--network-netns", in.HostNS, "--network-uplink", fakenet.UplinkName, "--network-dns", fakenet.UpstreamDNS,
			"--network-run-dir", n.runDir, "--network-subnet", n.subnet,
			// Other daemons' subnets are in the always-denied 10/8; permit
			// them, so that what keeps a sandbox from another daemon's is
			// that daemon's rules and not this one's policy.
			"--network-permit", "10.88.0.0/16",
		}
		if i > 0 {
			n.bridge, n.table, n.veth = fmt.Sprintf("wtest%d", i), fmt.Sprintf("warren-t%d", i), fmt.Sprintf("wt%d", i)
			args = append(args, "--network-bridge", n.bridge, "--network-table", n.table, "--network-veth-prefix", n.veth,
				"--network-log-group", fmt.Sprint(4300+i))
		}
		n.d = busyboxDaemon(t, args...)
		ns = append(ns, n)
	}
	return ns
}

// TestSeveralDaemons runs three daemons side by side on one host (a fake
// host namespace, shared as a real host's would be): each with networked
// sandboxes under an egress policy; no sandbox reaches another daemon's,
// even when its own policy opens that daemon's subnet; a restart of one,
// and the teardown of another (the one that switched the uplink's
// forwarding on), leave the rest working with their rules, and a
// teardown removes all of its own and nothing else.
func TestSeveralDaemons(t *testing.T) {
	t.Parallel()
	testutil.RequireRoot(t)
	dir := t.TempDir()
	in, err := fakenet.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Registered first, so run last: after the daemons' cleanups.
	t.Cleanup(func() {
		if err := fakenet.UnmountUnder(dir); err != nil {
			t.Errorf("unmount the network run dirs: %v", err)
		}
		if err := in.Close(); err != nil {
			t.Errorf("remove the fake internet: %v", err)
		}
	})
	ns := startNeighbours(t, in, dir)
	ctx := ctxT(t, 8*time.Minute)
	srv := fakenet.Servers
	for _, n := range ns {
		c := n.d.client()
		sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", Network: &client.Network{AllowOut: []string{srv[0], "10.88.0.0/16"}}})
		if err != nil {
			t.Fatal(err)
		}
		n.sb = sandboxNet{t, c, ctx, sb.SandboxID}
	}
	// A server in the second daemon's sandbox: its own sandbox reaches it,
	// the others' (whose policy allows its address) do not.
	b := ns[1].sb
	if _, err := b.c.Processes.Start(ctx, b.id, client.StartProcessRequest{Tag: "srv", ExecRequest: client.ExecRequest{
		Command: "echo hello from b > /tmp/index.html; httpd -f -p 8080 -h /tmp", User: "root"}}); err != nil {
		t.Fatal(err)
	}
	bAddr := b.address()
	waitFor(t, 10*time.Second, "the server in b", func() bool {
		return b.run("timeout 5 wget -q -O - http://127.0.0.1:8080/index.html").Stdout == "hello from b\n"
	})
	checkNeighbours := func(live []*neighbour, when string) {
		t.Helper()
		for _, n := range live {
			n.sb.mustReach(srv[0], srv[0])
			n.sb.mustNotReach(srv[1])
			if n != ns[1] {
				n.sb.mustNotConnect(bAddr + ":8080")
			}
			for _, other := range live {
				if other != n {
					gw := strings.TrimSuffix(other.subnet, "0/24") + "1"
					n.sb.mustNotConnect(gw + ":53")
				}
			}
			if got := n.counts(t, in); got.Veths != 1 || got.Mounts != 1 || got.Chains != 1 || got.MapElems != 1 {
				t.Fatalf("%s: daemon %s has on the host %+v, want one sandbox's network", when, n.d.dataDir, got)
			}
			if bridge, table := hostHas(t, in, n.bridge, n.table); !bridge || !table {
				t.Fatalf("%s: daemon %s's bridge %s there: %v, table %s: %v", when, n.d.dataDir, n.bridge, bridge, n.table, table)
			}
			if len(cgroupsNamed(n.d.cgroupParent)) == 0 {
				t.Fatalf("%s: daemon %s's cgroup parent %s is gone", when, n.d.dataDir, n.d.cgroupParent)
			}
		}
	}
	checkNeighbours(ns, "side by side")
	// Each daemon's audit (its own NFLOG group) sees its own sandbox.
	for _, n := range ns {
		waitNetEvent(t, n.d.client(), ctx, n.sb.id, "deny of "+srv[1], func(e client.NetworkEvent) bool {
			return e.Verdict == "deny" && e.Destination == srv[1]
		})
	}

	// A crash and restart of the second leaves the others as they were and
	// puts its own rules back.
	ns[1].d.stop(syscall.SIGKILL)
	checkNeighbours([]*neighbour{ns[0], ns[2]}, "the second daemon down")
	ns[1].d.start()
	ns[1].sb.c = ns[1].d.client()
	checkNeighbours(ns, "the second daemon restarted")

	// Tearing down the first (which switched the uplink's forwarding on)
	// removes all of its own and leaves the others working.
	teardownNeighbour(t, ns[0])
	if got := ns[0].counts(t, in); got != (fakenet.Counts{}) {
		t.Fatalf("after its teardown, the first daemon has on the host %+v", got)
	}
	if bridge, table := hostHas(t, in, ns[0].bridge, ns[0].table); bridge || table {
		t.Fatalf("after its teardown, the first daemon's bridge (%v) or table (%v) is left", bridge, table)
	}
	if left := cgroupsNamed(ns[0].d.cgroupParent, ns[0].d.cgroupParent+"-gvisor"); len(left) > 0 {
		t.Fatalf("after its teardown, the first daemon's cgroups are left: %v", left)
	}
	if left := mountsUnder(t, ns[0].d.dataDir); len(left) > 0 {
		t.Fatalf("after its teardown, the first daemon's mounts are left: %v", left)
	}
	if got := uplinkForwarding(t, in); got != "1" {
		t.Fatalf("the uplink's forwarding is %q after the first daemon's teardown; the others still need it", got)
	}
	checkNeighbours(ns[1:], "the first daemon torn down")
	// (srv[2]: an address no sandbox tried before.)
	ns[2].sb.mustNotReach(srv[2])
	waitNetEvent(t, ns[2].d.client(), ctx, ns[2].sb.id, "deny of "+srv[2]+" after the teardown", func(e client.NetworkEvent) bool {
		return e.Verdict == "deny" && e.Destination == srv[2]
	})

	// The last one out puts the uplink's forwarding back.
	for _, n := range ns[1:] {
		teardownNeighbour(t, n)
		if bridge, table := hostHas(t, in, n.bridge, n.table); bridge || table {
			t.Fatalf("after its teardown, daemon %s's bridge (%v) or table (%v) is left", n.d.dataDir, bridge, table)
		}
	}
	if got := uplinkForwarding(t, in); got != "0" {
		t.Fatalf("the uplink's forwarding is %q after every daemon's teardown, want 0 as before", got)
	}
}

// teardownNeighbour kills a neighbour's daemon and runs `warren teardown`
// on its data directory.
func teardownNeighbour(t *testing.T, n *neighbour) {
	t.Helper()
	n.d.stop(syscall.SIGKILL)
	cmd := exec.Command(filepath.Join(n.d.bin, "warren"), "teardown", "--yes", "--data-dir", n.d.dataDir)
	cmd.Env = append(os.Environ(), "WARREN_NETWORK_RUN_DIR="+n.runDir, n.d.cgroupEnv())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("teardown of %s: %v\n%s", n.d.dataDir, err, out)
	}
}

// hostHas reports whether the fake host has an interface named bridge and
// an inet nftables table named table.
func hostHas(t *testing.T, in *fakenet.Internet, bridge, table string) (hasBridge, hasTable bool) {
	t.Helper()
	if err := fakenet.InNS(in.HostNS, func() error {
		out, err := exec.Command("ip", "-o", "link", "show", "dev", bridge).CombinedOutput()
		hasBridge = err == nil && strings.Contains(string(out), bridge+":")
		out, err = exec.Command("nft", "list", "tables").CombinedOutput()
		if err != nil {
			return fmt.Errorf("nft list tables: %v: %s", err, out)
		}
		hasTable = slices.Contains(strings.Split(string(out), "\n"), "table inet "+table)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return hasBridge, hasTable
}

// uplinkForwarding reads the fake host's uplink forwarding switch.
func uplinkForwarding(t *testing.T, in *fakenet.Internet) string {
	t.Helper()
	var v string
	if err := fakenet.InNS(in.HostNS, func() error {
		b, err := os.ReadFile("/proc/sys/net/ipv4/conf/" + fakenet.UplinkName + "/forwarding")
		v = strings.TrimSpace(string(b))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return v
}

// mountsUnder lists the mount points under dir.
func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var found []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) > 4 && strings.HasPrefix(fields[4], dir+"/") {
			found = append(found, fields[4])
		}
	}
	return found
}
