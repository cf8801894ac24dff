package network

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/mountinfo"
)

func TestEgressPolicy(t *testing.T) {
	f := newFakeInternet(t)
	m := f.manager(t)
	ctx := context.Background()

	a, err := m.Setup(ctx, "sba", Policy{})
	must(t, err)
	b, err := m.Setup(ctx, "sbb", Policy{})
	must(t, err)
	if a.Address == b.Address || !netip.MustParsePrefix(testSubnet).Contains(a.Address) || a.Gateway != m.Gateway() {
		t.Fatalf("attachments: %+v %+v", a, b)
	}
	if _, err := m.Setup(ctx, "sba", Policy{}); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Fatalf("second Setup: %v, want ErrAlreadyExists", err)
	}
	// A server inside sandbox b, which a must not reach.
	bNS := openNS(t, b.NetNSPath)
	f.closers = append(f.closers, serveTCP(t, bNS, "0.0.0.0:8080"))
	update := func(p Policy) {
		t.Helper()
		must(t, m.Update(ctx, "sba", p))
	}

	t.Run("no policy reaches nothing", func(t *testing.T) {
		mustBeRefused(t, a.NetNSPath, "198.51.100.10:80")
		mustBeRefused(t, a.NetNSPath, "203.0.113.53:80")
		if r := resolve(t, a, "allowed.example", dns.TypeA); r.Rcode != dns.RcodeNameError {
			t.Fatalf("lookup with no policy: %s, want NXDOMAIN", dns.RcodeToString[r.Rcode])
		}
	})

	t.Run("allowOut of one address reaches only it", func(t *testing.T) {
		update(Policy{AllowOut: []string{"198.51.100.10/32"}})
		mustReach(t, a.NetNSPath, "198.51.100.10:80")
		mustBeRefused(t, a.NetNSPath, "198.51.100.20:80")
		mustBeRefused(t, a.NetNSPath, "198.51.100.30:80")
		// b's policy is its own.
		mustBeRefused(t, b.NetNSPath, "198.51.100.10:80")
	})

	t.Run("deny wins over allow", func(t *testing.T) {
		update(Policy{AllowOut: []string{"198.51.100.0/24"}, DenyOut: []string{"198.51.100.20"}})
		mustReach(t, a.NetNSPath, "198.51.100.10:80")
		mustReach(t, a.NetNSPath, "198.51.100.30:80")
		mustBeRefused(t, a.NetNSPath, "198.51.100.20:80")
		// And over the default.
		update(Policy{AllowInternetAccess: true, DenyOut: []string{"198.51.100.20/32"}})
		mustReach(t, a.NetNSPath, "198.51.100.30:80")
		mustBeRefused(t, a.NetNSPath, "198.51.100.20:80")
		// E2B's "only these": denyOut 0.0.0.0/0 is the default, not a wall.
		update(Policy{AllowInternetAccess: true, AllowOut: []string{"198.51.100.30"}, DenyOut: []string{"0.0.0.0/0"}})
		mustReach(t, a.NetNSPath, "198.51.100.30:80")
		mustBeRefused(t, a.NetNSPath, "198.51.100.10:80")
	})

	t.Run("domain rules admit exactly the resolved address", func(t *testing.T) {
		update(Policy{AllowOut: []string{"allowed.example", "*.wild.example", "rebind.example"}, DenyOut: []string{"denied.example"}})
		mustBeRefused(t, a.NetNSPath, "198.51.100.10:80") // not before the lookup
		r := resolve(t, a, "allowed.example", dns.TypeA)
		if got := answerA(r); r.Rcode != dns.RcodeSuccess || !slices.Equal(got, []string{"198.51.100.10"}) {
			t.Fatalf("allowed.example: %s %v", dns.RcodeToString[r.Rcode], got)
		}
		mustReach(t, a.NetNSPath, "198.51.100.10:80")
		mustBeRefused(t, a.NetNSPath, "198.51.100.30:80")

		r = resolve(t, a, "denied.example", dns.TypeA)
		if r.Rcode != dns.RcodeNameError || len(r.Answer) != 0 {
			t.Fatalf("denied.example: %s %v, want NXDOMAIN", dns.RcodeToString[r.Rcode], r.Answer)
		}
		if opt := r.IsEdns0(); opt == nil || len(opt.Option) == 0 || opt.Option[0].(*dns.EDNS0_EDE).InfoCode != dns.ExtendedErrorCodeProhibited {
			t.Fatalf("denied.example carries no 'prohibited' extended error: %v", r)
		}
		mustBeRefused(t, a.NetNSPath, "198.51.100.20:80")
		if r := resolve(t, a, "other.example", dns.TypeA); r.Rcode != dns.RcodeNameError {
			t.Fatalf("a name in no list under default deny: %s, want NXDOMAIN", dns.RcodeToString[r.Rcode])
		}
		if r := resolve(t, a, "wild.example", dns.TypeA); r.Rcode != dns.RcodeNameError {
			t.Fatalf("*.wild.example matched its apex: %s", dns.RcodeToString[r.Rcode])
		}
		r = resolve(t, a, "a.wild.example", dns.TypeA)
		if got := answerA(r); !slices.Equal(got, []string{"198.51.100.30"}) {
			t.Fatalf("a.wild.example: %s %v", dns.RcodeToString[r.Rcode], got)
		}
		mustReach(t, a.NetNSPath, "198.51.100.30:80")
		if r := resolve(t, a, "allowed.example", dns.TypeAAAA); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 0 {
			t.Fatalf("AAAA: %s %v, want an empty answer (IPv4 only)", dns.RcodeToString[r.Rcode], r.Answer)
		}
		// An allowed name pointing into a private range opens nothing.
		if got := answerA(resolve(t, a, "rebind.example", dns.TypeA)); !slices.Equal(got, []string{"10.1.2.3"}) {
			t.Fatalf("rebind.example: %v", got)
		}
		mustBeRefused(t, a.NetNSPath, "10.1.2.3:80")
		// Another sandbox's policy opened nothing for b.
		mustBeRefused(t, b.NetNSPath, "198.51.100.10:80")
		if r := resolve(t, b, "allowed.example", dns.TypeA); r.Rcode != dns.RcodeNameError {
			t.Fatalf("b resolved a's name: %s", dns.RcodeToString[r.Rcode])
		}
	})

	t.Run("always denied even with allowOut 0.0.0.0/0", func(t *testing.T) {
		update(Policy{AllowInternetAccess: true, AllowOut: []string{"0.0.0.0/0", "10.0.0.0/8", "169.254.169.254"}})
		mustReach(t, a.NetNSPath, "198.51.100.20:80")
		for _, dst := range []string{
			"169.254.169.254:80", // cloud metadata
			"10.1.2.3:80",        // a private range, routed out the uplink
			fmt.Sprintf("%s:%d", hostUplink, apiPort),  // the host's address
			fmt.Sprintf("%s:%d", a.Gateway, apiPort),   // the host, on the bridge
			fmt.Sprintf("%s:%d", b.Address, 8080),      // the other sandbox
			netip.AddrPortFrom(a.Gateway, 22).String(), // anything on the host but DNS
		} {
			mustBeRefused(t, a.NetNSPath, dst)
		}
		update(Policy{AllowInternetAccess: true})
		if got := answerA(resolve(t, a, "metadata.example", dns.TypeA)); !slices.Equal(got, []string{"169.254.169.254"}) {
			t.Fatalf("metadata.example: %v", got)
		}
		mustBeRefused(t, a.NetNSPath, "169.254.169.254:80")
	})

	t.Run("live update cuts established connections", func(t *testing.T) {
		update(Policy{AllowOut: []string{"198.51.100.10", "198.51.100.30"}})
		denied, _, err := dialFrom(t, a.NetNSPath, "198.51.100.10:80")
		must(t, err)
		defer denied.Close()
		kept, _, err := dialFrom(t, a.NetNSPath, "198.51.100.30:80")
		must(t, err)
		defer kept.Close()
		echo(t, denied, "before")

		// A reader blocked on the soon-denied connection sees the cut.
		readErr := make(chan error, 1)
		go func() {
			_ = denied.SetReadDeadline(time.Now().Add(20 * time.Second))
			_, err := denied.Read(make([]byte, 16))
			readErr <- err
		}()
		update(Policy{AllowOut: []string{"198.51.100.30"}})
		mustBeRefused(t, a.NetNSPath, "198.51.100.10:80") // new connections at once
		err = <-readErr
		var ne net.Error
		if err == nil || errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("read on a cut connection: %v, want it aborted", err)
		}
		if _, err := denied.Write([]byte("after\n")); err == nil {
			t.Fatalf("write on a cut connection succeeded")
		}
		echo(t, kept, "still here") // an allowed connection is untouched
		flows, err := conntrackFlows(f, a.Address, netip.MustParseAddr("198.51.100.10"))
		must(t, err)
		if flows != 0 {
			t.Fatalf("%d conntrack entries to the denied address remain", flows)
		}
	})

	t.Run("audit lists attempts with verdicts", func(t *testing.T) {
		ip := netip.MustParseAddr
		waitEvent(t, m, "sba", "allow tcp 198.51.100.10:80", func(e Event) bool {
			return e.Verdict == VerdictAllow && e.Protocol == "tcp" && e.Dst == ip("198.51.100.10") && e.Port == 80 && e.Reason == ReasonPolicy
		})
		waitEvent(t, m, "sba", "deny tcp 198.51.100.20:80 by policy", func(e Event) bool {
			return e.Verdict == VerdictDeny && e.Dst == ip("198.51.100.20") && e.Reason == ReasonPolicy
		})
		waitEvent(t, m, "sba", "deny by default", func(e Event) bool {
			return e.Verdict == VerdictDeny && e.Dst == ip("198.51.100.10") && e.Reason == ReasonDefault
		})
		waitEvent(t, m, "sba", "deny metadata", func(e Event) bool {
			return e.Verdict == VerdictDeny && e.Dst == ip("169.254.169.254") && e.Reason == ReasonReserved
		})
		waitEvent(t, m, "sba", "deny the host", func(e Event) bool {
			return e.Verdict == VerdictDeny && e.Dst == ip(hostUplink) && e.Port == apiPort && e.Reason == ReasonHost
		})
		waitEvent(t, m, "sba", "allow by domain, with the domain", func(e Event) bool {
			return e.Verdict == VerdictAllow && e.Protocol == "tcp" && e.Reason == ReasonDomain && e.Domain == "allowed.example" && e.Dst == ip("198.51.100.10")
		})
		waitEvent(t, m, "sba", "dns lookup denied", func(e Event) bool {
			return e.Protocol == "dns" && e.Verdict == VerdictDeny && e.Domain == "denied.example" && e.Reason == ReasonPolicy
		})
		waitEvent(t, m, "sba", "dns lookup allowed", func(e Event) bool {
			return e.Protocol == "dns" && e.Verdict == VerdictAllow && e.Domain == "allowed.example"
		})
		for _, e := range m.Events("sbb", 0, 1000) {
			if e.SandboxID != "sbb" || e.Verdict != VerdictDeny && e.Protocol != "dns" {
				t.Fatalf("b's audit holds %+v", e)
			}
		}
		// Paging: after the last seen sequence number, only newer events.
		all := m.Events("sba", 0, 100000)
		last := all[len(all)-1].Seq
		if got := m.Events("sba", last, 10); len(got) != 0 {
			t.Fatalf("events after the last: %v", got)
		}
		if got := m.Events("sba", all[0].Seq, 2); len(got) != 2 || got[0].Seq <= all[0].Seq {
			t.Fatalf("a page of 2 after %d: %v", all[0].Seq, got)
		}
	})

	t.Run("teardown and reconcile leave nothing", func(t *testing.T) {
		before := f.count(t)
		if before.veths != 2 || before.mounts != 2 || before.chains != 2 || before.sets != 6 || before.mapElems != 2 {
			t.Fatalf("with two sandboxes: %+v", before)
		}
		must(t, m.Teardown(ctx, "sbb"))
		must(t, m.Teardown(ctx, "sbb")) // again: nothing to do, no error
		if got := f.count(t); got != (counts{veths: 1, mounts: 1, nsFiles: 1, chains: 1, sets: 3, mapElems: 1}) {
			t.Fatalf("after tearing down one of two: %+v", got)
		}
		if _, err := os.Stat(b.NetNSPath); !os.IsNotExist(err) {
			t.Fatalf("netns mount point of b: %v", err)
		}
		c, err := m.Setup(ctx, "sbc", Policy{AllowInternetAccess: true})
		must(t, err)
		mustReach(t, c.NetNSPath, "198.51.100.20:80")
		must(t, m.Reconcile(ctx, map[string]bool{"sba": true}))
		if got := f.count(t); got != (counts{veths: 1, mounts: 1, nsFiles: 1, chains: 1, sets: 3, mapElems: 1}) {
			t.Fatalf("after reconcile keeping a: %+v", got)
		}
		mustReach(t, a.NetNSPath, "198.51.100.30:80")
		if err := m.Update(ctx, "sbc", Policy{}); !errors.Is(err, errdefs.ErrNotFound) {
			t.Fatalf("update of a reconciled sandbox: %v", err)
		}
		must(t, m.Reconcile(ctx, nil))
		if got := f.count(t); got != (counts{}) {
			t.Fatalf("after reconcile keeping nothing: %+v", got)
		}
	})
}

// echo writes a line and expects it back.
func echo(t *testing.T, c net.Conn, s string) {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := io.WriteString(c, s+"\n"); err != nil {
		t.Fatalf("write: %v", err)
	}
	buf := make([]byte, len(s)+1)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != s+"\n" {
		t.Fatalf("echo: %q %v", buf, err)
	}
}

func conntrackFlows(f *fakeInternet, src, dst netip.Addr) (int, error) {
	h, err := netlink.NewHandleAt(f.hostH, unix.NETLINK_NETFILTER)
	if err != nil {
		return 0, err
	}
	defer h.Close()
	flows, err := h.ConntrackTableList(netlink.ConntrackTable, unix.AF_INET)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, fl := range flows {
		s, _ := netip.AddrFromSlice(fl.Forward.SrcIP)
		d, _ := netip.AddrFromSlice(fl.Forward.DstIP)
		if s.Unmap() == src && d.Unmap() == dst {
			n++
		}
	}
	return n, nil
}

// A daemon that dies (or restarts) leaves the rules in force; the next one
// adopts the sandboxes it is told to keep and removes the others; Uninstall
// removes everything and puts forwarding back.
func TestRestartAdoptsAndReconciles(t *testing.T) {
	f := newFakeInternet(t)
	ctx := context.Background()
	fwdBefore := readFwd(t, f, "uplink0")
	if fwdBefore != "0" {
		t.Fatalf("a fresh namespace forwards on its uplink: %s", fwdBefore)
	}

	m1 := f.manager(t)
	pol := Policy{AllowOut: []string{"198.51.100.10", "other.example"}}
	a, err := m1.Setup(ctx, "keep1", pol)
	must(t, err)
	_, err = m1.Setup(ctx, "gone1", Policy{AllowInternetAccess: true})
	must(t, err)
	if readFwd(t, f, "uplink0") != "1" || readFwd(t, f, "warren0") != "1" {
		t.Fatalf("forwarding not enabled on the bridge and the uplink")
	}
	if got := answerA(resolve(t, a, "other.example", dns.TypeA)); !slices.Equal(got, []string{"198.51.100.30"}) {
		t.Fatalf("lookup: %v", got)
	}
	byName, _, err := dialFrom(t, a.NetNSPath, "198.51.100.30:80")
	must(t, err)
	defer byName.Close()
	must(t, m1.Close())

	// No daemon: the kernel keeps enforcing.
	mustReach(t, a.NetNSPath, "198.51.100.10:80")
	mustReach(t, a.NetNSPath, "198.51.100.30:80")
	mustBeRefused(t, a.NetNSPath, "198.51.100.20:80")
	mustBeRefused(t, a.NetNSPath, "169.254.169.254:80")

	m2 := f.manager(t)
	got, err := m2.Setup(ctx, "keep1", pol)
	must(t, err)
	if *got != *a {
		t.Fatalf("adopted attachment %+v, was %+v", got, a)
	}
	// A new sandbox does not take the address of one not adopted yet.
	c, err := m2.Setup(ctx, "new1", Policy{})
	must(t, err)
	if c.Address == a.Address {
		t.Fatalf("new sandbox got adopted sandbox's address")
	}
	must(t, m2.Reconcile(ctx, map[string]bool{"keep1": true, "new1": true}))
	if n := f.count(t); n.veths != 2 || n.mounts != 2 || n.chains != 2 || n.mapElems != 2 {
		t.Fatalf("after reconcile: %+v", n)
	}
	mustReach(t, a.NetNSPath, "198.51.100.10:80")
	// An update that keeps the names keeps what the resolver opened before
	// the restart, and the connection to it.
	must(t, m2.Update(ctx, "keep1", Policy{AllowOut: []string{"198.51.100.20", "other.example"}}))
	mustBeRefused(t, a.NetNSPath, "198.51.100.10:80")
	mustReach(t, a.NetNSPath, "198.51.100.20:80")
	mustReach(t, a.NetNSPath, "198.51.100.30:80")
	echo(t, byName, "across the restart")
	// One that changes them closes it.
	must(t, m2.Update(ctx, "keep1", Policy{AllowOut: []string{"198.51.100.20"}}))
	mustBeRefused(t, a.NetNSPath, "198.51.100.30:80")
	if _, err := byName.Write([]byte("cut\n")); err == nil {
		if _, err := byName.Read(make([]byte, 8)); err == nil {
			t.Fatalf("connection to a closed name still works")
		}
	}

	must(t, m2.Uninstall(context.Background()))
	if n := f.count(t); n != (counts{}) {
		t.Fatalf("after uninstall: %+v", n)
	}
	if readFwd(t, f, "uplink0") != "0" {
		t.Fatalf("forwarding on the uplink not restored")
	}
	if _, err := os.Stat(filepath.Join(f.runDir, forwardingFile)); !os.IsNotExist(err) {
		t.Fatalf("forwarding record left: %v", err)
	}
	h, err := netlink.NewHandleAt(f.hostH)
	must(t, err)
	defer h.Close()
	if _, err := h.LinkByName("warren0"); err == nil {
		t.Fatalf("bridge left after uninstall")
	}
	mounts, err := mountinfo.Read()
	must(t, err)
	for _, mt := range mounts {
		if mt.MountPoint == filepath.Join(f.runDir, "netns") {
			t.Fatalf("netns dir still mounted")
		}
	}
	err = inNS(t, a.NetNSPath, func() error { return nil })
	if err == nil {
		t.Fatalf("sandbox netns mount left after uninstall")
	}
}

func readFwd(t *testing.T, f *fakeInternet, iface string) string {
	t.Helper()
	var v string
	must(t, inNetNS(f.hostH, func() (err error) {
		v, err = readSysctl(forwardingSysctl(iface))
		return err
	}))
	return v
}

// A failed Setup leaves nothing behind.
func TestSetupFailureLeavesNothing(t *testing.T) {
	f := newFakeInternet(t)
	f.opts.Subnet = netip.MustParsePrefix("10.88.0.0/29") // gateway + 5 sandboxes
	m := f.manager(t)
	ctx := context.Background()
	for i := range 5 {
		_, err := m.Setup(ctx, fmt.Sprintf("s%d", i), Policy{})
		must(t, err)
	}
	if _, err := m.Setup(ctx, "s5", Policy{}); !errors.Is(err, errdefs.ErrResourceExhausted) {
		t.Fatalf("setup in a full subnet: %v", err)
	}
	if _, err := m.Setup(ctx, "bad", Policy{AllowOut: []string{"not a name!"}}); !errors.Is(err, errdefs.ErrInvalid) {
		t.Fatalf("setup with a bad policy: %v", err)
	}
	// A stray namespace mount with the name of the next sandbox is cleaned
	// up, not tripped over.
	stray := filepath.Join(f.runDir, "netns", "s9")
	h, err := createNetNS(stray, nil)
	must(t, err)
	h.Close()
	must(t, m.Teardown(ctx, "s0"))
	_, err = m.Setup(ctx, "s9", Policy{})
	must(t, err)
	if n := f.count(t); n.veths != 5 || n.mounts != 5 || n.nsFiles != 5 || n.chains != 5 {
		t.Fatalf("counts: %+v", n)
	}
}

// Sandbox addresses stay pinned to their sandbox: a sandbox that spoofs
// another's address cannot borrow its policy, because it lacks the
// capability to change addresses; this test documents what the ruleset
// assumes by checking the sandbox side has exactly one address.
func TestSandboxSide(t *testing.T) {
	f := newFakeInternet(t)
	m := f.manager(t)
	a, err := m.Setup(context.Background(), "side", Policy{})
	must(t, err)
	h, err := netlink.NewHandleAt(openNS(t, a.NetNSPath))
	must(t, err)
	defer h.Close()
	eth, err := h.LinkByName(SandboxInterface)
	must(t, err)
	addrs, err := h.AddrList(eth, netlink.FAMILY_ALL)
	must(t, err)
	if len(addrs) != 1 || addrs[0].IPNet.String() != a.Address.String()+"/32" {
		t.Fatalf("eth0 addresses: %v (IPv6 must be off)", addrs)
	}
	lo, err := h.LinkByName("lo")
	must(t, err)
	if lo.Attrs().Flags&net.FlagUp == 0 {
		t.Fatalf("loopback is down")
	}
	// Loopback works inside the sandbox whatever the policy.
	var ln net.Listener
	must(t, inNS(t, a.NetNSPath, func() (err error) { ln, err = net.Listen("tcp4", "127.0.0.1:0"); return err }))
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			fmt.Fprintln(c, "hello from 127.0.0.1")
			c.Close()
		}
	}()
	mustReach(t, a.NetNSPath, ln.Addr().String())
	if _, _, err := dialFrom(t, a.NetNSPath, "198.51.100.10:80"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial out: %v", err)
	}
}
