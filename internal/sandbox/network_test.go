package sandbox

import (
	"net/netip"
	"os"
	"testing"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/network"
)

// A host without networking refuses networked sandboxes plainly, and
// costs nothing for the others.
func TestNoNetworks(t *testing.T) {
	var n *Networks
	if err := n.Available(); !errdefs.IsUnsupported(err) {
		t.Fatalf("Available: %v", err)
	}
	if _, err := n.Start(); !errdefs.IsUnsupported(err) {
		t.Fatalf("Start: %v", err)
	}
	if n.Running() != nil || n.LeftBehind() || n.Close() != nil {
		t.Fatal("a nil Networks is not inert")
	}
	nw := &sandboxNetworks{}
	if err := nw.teardownNetwork(t.Context(), "sb"); err != nil {
		t.Fatal(err)
	}
	if err := nw.reconcileNetwork(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
}

// The run directory's record names its owner: another data directory's
// teardown does not take it for its own.
func TestRecordedNetwork(t *testing.T) {
	dir := t.TempDir()
	if _, ok, err := RecordedNetwork(dir, "/var/lib/warren"); ok || err != nil {
		t.Fatalf("nothing recorded: %v %v", ok, err)
	}
	opts := network.Options{RunDir: dir, NetNS: "/run/netns/host", Bridge: "warren0", Subnet: netip.MustParsePrefix("10.88.0.0/16"),
		Table: "warren-b", VethPrefix: "wrb", LogGroup: 4270,
		Uplink: "eth0", Upstream: "203.0.113.53:53", Permit: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}}
	if err := writeNetworkOptions(opts, "/var/lib/warren"); err != nil {
		t.Fatal(err)
	}
	got, ok, err := RecordedNetwork(dir, "/var/lib/warren")
	if err != nil || !ok || got.NetNS != opts.NetNS || got.Subnet != opts.Subnet || got.Bridge != opts.Bridge ||
		got.Uplink != opts.Uplink || got.Upstream != opts.Upstream || len(got.Permit) != 1 || got.Permit[0] != opts.Permit[0] || got.RunDir != dir ||
		got.Table != opts.Table || got.VethPrefix != opts.VethPrefix || got.LogGroup != opts.LogGroup {
		t.Fatalf("read back %+v %v %v", got, ok, err)
	}
	if _, ok, _ := RecordedNetwork(dir, "/srv/other"); ok {
		t.Fatal("another data directory's teardown would take this network")
	}
}

// A run directory another daemon's record names is refused while that
// daemon's data directory exists, and taken over once it is gone.
func TestRunDirOwner(t *testing.T) {
	dir, owner := t.TempDir(), t.TempDir()
	if err := checkRunDirOwner(dir, "/srv/new"); err != nil {
		t.Fatalf("an unrecorded run dir: %v", err)
	}
	if err := writeNetworkOptions(network.Options{RunDir: dir, Subnet: netip.MustParsePrefix("10.88.0.0/16")}, owner); err != nil {
		t.Fatal(err)
	}
	if err := checkRunDirOwner(dir, owner); err != nil {
		t.Fatalf("its own run dir: %v", err)
	}
	if err := checkRunDirOwner(dir, "/srv/new"); !errdefs.IsConflict(err) {
		t.Fatalf("another daemon's run dir: %v, want a conflict", err)
	}
	if err := os.Remove(owner); err != nil {
		t.Fatal(err)
	}
	if err := checkRunDirOwner(dir, "/srv/new"); err != nil {
		t.Fatalf("a run dir whose owner is gone: %v", err)
	}
}
