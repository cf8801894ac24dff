package network

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
)

// A sandbox can use the network as soon as Setup returns. Bringing a link up
// completes asynchronously (the kernel's link watch activates its queue);
// until then the device drops what it sends, the first ARP request is lost
// and the first connection waits a second. Setup waits for it, so both ends
// of the veth and the bridge are operational when it returns, including
// when the bridge was empty.
func TestSetupReturnsUsableLinks(t *testing.T) {
	f := newFakeInternet(t)
	m := f.manager(t)
	ctx := context.Background()
	host, err := netlink.NewHandleAt(f.hostH)
	must(t, err)
	defer host.Close()
	for i := range 9 {
		id := fmt.Sprintf("first%d", i)
		a, err := m.Setup(ctx, id, Policy{AllowInternetAccess: true})
		must(t, err)
		inner, err := netlink.NewHandleAt(openNS(t, a.NetNSPath))
		must(t, err)
		for _, c := range []struct {
			h    *netlink.Handle
			name string
		}{{host, a.HostVeth}, {inner, SandboxInterface}, {host, "warren0"}} {
			l, err := c.h.LinkByName(c.name)
			must(t, err)
			if st := l.Attrs().OperState; st != netlink.OperUp && st != netlink.OperUnknown {
				t.Fatalf("%s: %s is %s when Setup returns", id, c.name, st)
			}
		}
		inner.Close()
		mustReach(t, a.NetNSPath, "198.51.100.10:80")
		// Empty the bridge now and then: its first port is the slow case.
		if i%3 == 2 {
			for j := i - 2; j <= i; j++ {
				must(t, m.Teardown(ctx, fmt.Sprintf("first%d", j)))
			}
		}
	}
}

// Turning forwarding on for the uplink must not turn the host into a router
// between the uplink and its other networks: only replies toward the
// bridge are forwarded from the uplink.
func TestUplinkForwardsOnlyToTheBridge(t *testing.T) {
	f := newFakeInternet(t)
	// A second network on the host, behind "lan0".
	lanNS := openNS(t, f.makeNS(t, "lan"))
	hh, err := netlink.NewHandleAt(f.hostH)
	must(t, err)
	defer hh.Close()
	lh, err := netlink.NewHandleAt(lanNS)
	must(t, err)
	defer lh.Close()
	la := netlink.NewLinkAttrs()
	la.Name = "lan0"
	must(t, hh.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: "eth0", PeerNamespace: netlink.NsFd(lanNS)}))
	for _, c := range []struct {
		h          *netlink.Handle
		name, addr string
	}{{hh, "lan0", "172.31.0.1/24"}, {lh, "eth0", "172.31.0.2/24"}} {
		l, err := c.h.LinkByName(c.name)
		must(t, err)
		a, err := netlink.ParseAddr(c.addr)
		must(t, err)
		must(t, c.h.AddrAdd(l, a))
		must(t, c.h.LinkSetUp(l))
	}
	var pc net.PacketConn
	must(t, inNetNS(lanNS, func() (err error) { pc, err = net.ListenPacket("udp4", "172.31.0.2:9999"); return err }))
	defer pc.Close()
	// The internet knows a route to the host's other network.
	uh, err := netlink.NewHandleAt(openNS(t, f.upNS))
	must(t, err)
	defer uh.Close()
	_, lanNet, _ := net.ParseCIDR("172.31.0.0/24")
	must(t, uh.RouteAdd(&netlink.Route{Dst: lanNet, Gw: net.ParseIP(hostUplink)}))

	f.manager(t)
	if got := readFwd(t, f, "uplink0"); got != "1" {
		t.Fatalf("uplink forwarding %s", got)
	}
	must(t, inNS(t, f.upNS, func() error {
		c, err := net.Dial("udp4", "172.31.0.2:9999")
		if err != nil {
			return err
		}
		defer c.Close()
		for range 3 {
			if _, err := c.Write([]byte("through the host")); err != nil {
				return err
			}
		}
		return nil
	}))
	_ = pc.SetReadDeadline(time.Now().Add(time.Second))
	if n, from, err := pc.ReadFrom(make([]byte, 64)); err == nil {
		t.Fatalf("the host forwarded %d bytes from %s, uplink to lan", n, from)
	}
}
