package network

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/warrenhq/warren/internal/errdefs"
)

// Two managers in one namespace (two daemons on one host), each with its
// own names: one's reconcile and uninstall leave the other's sandboxes,
// rules and forwarding alone, even though the first turned the uplink's
// forwarding on; the last one out puts it back.
func TestNeighbours(t *testing.T) {
	f := newFakeInternet(t)
	ctx := context.Background()
	m1 := f.manager(t)
	a, err := m1.Setup(ctx, "first1", Policy{AllowOut: []string{"198.51.100.10"}})
	must(t, err)

	opts2 := f.opts
	opts2.RunDir = filepath.Join(f.dir, "run2")
	opts2.Bridge, opts2.Table, opts2.VethPrefix, opts2.LogGroup = "wtest1", "warren-t1", "wt1", 4300
	opts2.Subnet = netip.MustParsePrefix("10.87.1.0/24")
	opts2.Permit = []netip.Prefix{netip.MustParsePrefix("10.87.0.0/24")}
	t.Cleanup(func() { unmountUnder(t, opts2.RunDir) })
	// An entry of the uplinks' shared forwarding whose only holder is gone
	// (its namespace and run directory with it) is swept.
	stale := filepath.Join(UplinkShareDir, "0-1-stale0")
	must(t, os.MkdirAll(stale, 0o700))
	must(t, os.WriteFile(filepath.Join(stale, "0123456789abcdef"), []byte(filepath.Join(f.dir, "gone")), 0o600))
	m2, err := New(opts2)
	must(t, err)
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		os.RemoveAll(stale)
		t.Fatalf("a dead entry of the uplinks' shared forwarding is left: %v", err)
	}
	t.Cleanup(func() {
		if !m2.closed {
			_ = m2.Uninstall(context.Background())
		}
	})
	// A third one given a subnet overlapping the first's is refused.
	opts3 := opts2
	opts3.RunDir = filepath.Join(f.dir, "run3")
	opts3.Bridge, opts3.Table, opts3.VethPrefix, opts3.LogGroup = "wtest2", "warren-t2", "wt2", 4301
	opts3.Subnet = netip.MustParsePrefix("10.87.0.128/25")
	t.Cleanup(func() { unmountUnder(t, opts3.RunDir) })
	if m3, err := New(opts3); !errdefs.IsConflict(err) {
		if err == nil {
			m3.Close()
		}
		t.Fatalf("a manager on an overlapping subnet: %v, want a conflict", err)
	}
	b, err := m2.Setup(ctx, "second1", Policy{AllowOut: []string{"198.51.100.10", "10.87.0.0/24"}})
	must(t, err)
	if b.HostVeth[:3] != "wt1" || a.HostVeth[:3] != DefaultVethPrefix {
		t.Fatalf("veths %s and %s", a.HostVeth, b.HostVeth)
	}
	mustReach(t, b.NetNSPath, "198.51.100.10:80")
	// A server in the first one's sandbox, which its host reaches; the
	// second one's sandbox does not, although its own policy (and the
	// operator's permit) allow it: the first one's rules drop it.
	aNS := openNS(t, a.NetNSPath)
	srv := serveTCP(t, aNS, "0.0.0.0:80")
	t.Cleanup(func() { srv.Close(); aNS.Close() })
	mustReach(t, f.hostNS, a.Address.String()+":80")
	if c, who, err := dialFrom(t, b.NetNSPath, a.Address.String()+":80"); err == nil {
		c.Close()
		t.Fatalf("the second manager's sandbox reached %s in the first's", who)
	}

	// The first one's reconcile with nothing to keep, then its uninstall.
	must(t, m1.Reconcile(ctx, map[string]bool{}))
	mustReach(t, b.NetNSPath, "198.51.100.10:80")
	must(t, m1.Uninstall(ctx))
	if n := f.count(t); n != (counts{}) {
		t.Fatalf("the first manager left %+v", n)
	}
	mustReach(t, b.NetNSPath, "198.51.100.10:80")
	mustBeRefused(t, b.NetNSPath, "198.51.100.20:80")
	if got := readFwd(t, f, "uplink0"); got != "1" {
		t.Fatalf("uplink forwarding %s after the first manager left; the second still uses it", got)
	}
	must(t, m2.Reconcile(ctx, map[string]bool{"second1": true}))
	mustReach(t, b.NetNSPath, "198.51.100.10:80")
	must(t, m2.Uninstall(ctx))
	if got := readFwd(t, f, "uplink0"); got != "0" {
		t.Fatalf("uplink forwarding %s after both left, want 0 as before", got)
	}
}
