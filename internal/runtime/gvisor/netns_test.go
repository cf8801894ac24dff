package gvisor

import (
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/warrenhq/warren/internal/network/fakenet"
	rt "github.com/warrenhq/warren/internal/runtime"
	"github.com/warrenhq/warren/internal/runtime/runtimetest"
)

// A sandbox given a prepared network namespace gets its interfaces, inside
// gVisor's own network stack (runsc --network=sandbox): it reaches a server
// at the other end of the namespace's veth.
func TestJoinsGivenNetworkNamespace(t *testing.T) {
	r := newTestRuntime(t)(t)
	dir := t.TempDir()
	sbxNS, peerNS := filepath.Join(dir, "sbx"), filepath.Join(dir, "peer")
	for _, p := range []string{sbxNS, peerNS} {
		if err := fakenet.CreateNS(p); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = fakenet.RemoveNS(p) })
	}
	handle := func(path string) *netlink.Handle {
		t.Helper()
		h, err := netns.GetFromPath(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		nl, err := netlink.NewHandleAt(h)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nl.Close)
		return nl
	}
	sbx, peer := handle(sbxNS), handle(peerNS)
	la := netlink.NewLinkAttrs()
	la.Name = "eth0"
	if err := sbx.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: "peer0"}); err != nil {
		t.Fatal(err)
	}
	p0, err := sbx.LinkByName("peer0")
	if err != nil {
		t.Fatal(err)
	}
	pf, err := netns.GetFromPath(peerNS)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	if err := sbx.LinkSetNsFd(p0, int(pf)); err != nil {
		t.Fatal(err)
	}
	up := func(nl *netlink.Handle, name, cidr string) {
		t.Helper()
		l, err := nl.LinkByName(name)
		if err != nil {
			t.Fatal(err)
		}
		addr, err := netlink.ParseAddr(cidr)
		if err != nil {
			t.Fatal(err)
		}
		if err := nl.AddrAdd(l, addr); err != nil {
			t.Fatal(err)
		}
		if err := nl.LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
	}
	up(sbx, "eth0", "10.200.0.2/24")
	up(peer, "peer0", "10.200.0.1/24")
	for _, nl := range []*netlink.Handle{sbx, peer} {
		lo, err := nl.LinkByName("lo")
		if err != nil {
			t.Fatal(err)
		}
		if err := nl.LinkSetUp(lo); err != nil {
			t.Fatal(err)
		}
	}
	var ln net.Listener
	if err := fakenet.InNS(peerNS, func() (err error) {
		ln, err = net.Listen("tcp4", "10.200.0.1:8080")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("hello from the peer\n"))
			c.Close()
		}
	}()

	script := "ip addr > /results/addr 2>&1\n" +
		"nc -w 5 10.200.0.1 8080 < /dev/null > /results/nc 2>&1\n"
	b := runtimetest.RunScript(t, r, runtimetest.BusyboxRootfs(t), script, func(s *rt.Spec) { s.NetNS = sbxNS })
	b.WaitDone(t, scriptTimeout)
	if got := b.Read("addr"); !strings.Contains(got, "10.200.0.2") {
		t.Errorf("addresses inside:\n%s\nwant the namespace's 10.200.0.2", got)
	}
	if got := b.Read("nc"); got != "hello from the peer" {
		t.Errorf("connection to the peer got %q", got)
	}
}
