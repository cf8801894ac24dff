package network

import (
	"bufio"
	"crypto/sha256"
	"encoding/base32"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/errdefs"
)

// vethName is the host side of a sandbox's veth: the prefix and a hash,
// because ids are longer than an interface name may be.
func vethName(prefix, id string) string {
	sum := sha256.Sum256([]byte(id))
	return prefix + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:]))[:vethHashLen]
}

// vethName is the host side of sandbox id's veth.
func (h *hostNet) vethName(id string) string { return vethName(h.vethPrefix, id) }

// isOurVeth reports whether an interface name is one of this manager's
// veths: its prefix and a hash of the right length. Another daemon's
// prefix never matches (see CheckVethPrefix).
func (h *hostNet) isOurVeth(name string) bool {
	return len(name) == len(h.vethPrefix)+vethHashLen && strings.HasPrefix(name, h.vethPrefix)
}

func vethAlias(id string, addr netip.Addr) string {
	return aliasPrefix + id + ":" + addr.String()
}

// parseAlias reads back what vethAlias wrote.
func parseAlias(alias string) (id string, addr netip.Addr, ok bool) {
	rest, ok := strings.CutPrefix(alias, aliasPrefix)
	if !ok {
		return "", netip.Addr{}, false
	}
	id, a, ok := strings.Cut(rest, ":")
	if !ok {
		return "", netip.Addr{}, false
	}
	addr, err := netip.ParseAddr(a)
	if err != nil || !addr.Is4() {
		return "", netip.Addr{}, false
	}
	return id, addr, true
}

// findUplink returns Options.Uplink, checked, or the default route's
// interface.
func (h *hostNet) findUplink(want string) (string, error) {
	if want != "" {
		if _, err := h.nl.LinkByName(want); err != nil {
			return "", fmt.Errorf("network: uplink %q: %w", want, err)
		}
		return want, nil
	}
	routes, err := h.nl.RouteList(nil, netlink.FAMILY_V4)
	if err != nil {
		return "", fmt.Errorf("network: list routes: %w", err)
	}
	for _, r := range routes {
		if (r.Dst == nil || r.Dst.IP.IsUnspecified() && maskBits(r.Dst) == 0) && r.LinkIndex > 0 {
			l, err := h.nl.LinkByIndex(r.LinkIndex)
			if err != nil {
				return "", fmt.Errorf("network: default route's interface: %w", err)
			}
			return l.Attrs().Name, nil
		}
	}
	return "", fmt.Errorf("network: no IPv4 default route to find the uplink by; set the uplink interface explicitly: %w", errdefs.ErrUnavailable)
}

func maskBits(n *net.IPNet) int {
	ones, _ := n.Mask.Size()
	return ones
}

// ensureBridge creates the bridge if missing and gives it the gateway
// address. It reports whether it created the bridge.
func (h *hostNet) ensureBridge() (bool, error) {
	created := false
	br, err := h.nl.LinkByName(h.bridge)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if !errors.As(err, &nf) {
			return false, fmt.Errorf("network: look up bridge %s: %w", h.bridge, err)
		}
		la := netlink.NewLinkAttrs()
		la.Name = h.bridge
		if err := h.nl.LinkAdd(&netlink.Bridge{LinkAttrs: la}); err != nil {
			return false, fmt.Errorf("network: create bridge %s: %w", h.bridge, err)
		}
		if br, err = h.nl.LinkByName(h.bridge); err != nil {
			return false, fmt.Errorf("network: look up bridge %s: %w", h.bridge, err)
		}
		// The alias marks the bridge as warren's to delete on Uninstall (an
		// alias given at creation is ignored by the kernel).
		if err := h.nl.LinkSetAlias(br, bridgeAlias); err != nil {
			return false, fmt.Errorf("network: label bridge %s: %w", h.bridge, err)
		}
		created = true
	} else if br.Type() != "bridge" {
		return false, fmt.Errorf("network: %s exists and is a %s, not a bridge: %w", h.bridge, br.Type(), errdefs.ErrConflict)
	}
	// Pin the bridge's MAC address. Left to itself a bridge takes the lowest
	// MAC of its ports, so adding a sandbox's veth could change the
	// gateway's MAC under every other sandbox, whose cached neighbour entry
	// would then send their packets nowhere for seconds. An address set
	// explicitly is never recalculated.
	if err := h.nl.LinkSetHardwareAddr(br, br.Attrs().HardwareAddr); err != nil {
		return false, fmt.Errorf("network: pin the MAC address of bridge %s: %w", h.bridge, err)
	}
	want := &netlink.Addr{IPNet: &net.IPNet{IP: h.gateway.AsSlice(), Mask: net.CIDRMask(h.subnet.Bits(), 32)}}
	if err := h.nl.AddrReplace(br, want); err != nil {
		return false, fmt.Errorf("network: address bridge %s: %w", h.bridge, err)
	}
	if err := h.nl.LinkSetUp(br); err != nil {
		return false, fmt.Errorf("network: bring up bridge %s: %w", h.bridge, err)
	}
	return created, nil
}

// checkSubnetFree refuses a subnet that overlaps an address of another
// bridge in the namespace: another daemon's (two daemons given one subnet)
// or another container engine's. Routes to the overlap would go to one
// bridge only, and each daemon's conntrack cleanup, which goes by source
// address, would cut the other's connections.
func (h *hostNet) checkSubnetFree() error {
	links, err := h.nl.LinkList()
	if err != nil {
		return fmt.Errorf("network: list interfaces: %w", err)
	}
	for _, l := range links {
		if l.Type() != "bridge" || l.Attrs().Name == h.bridge {
			continue
		}
		addrs, err := h.nl.AddrList(l, netlink.FAMILY_V4)
		if err != nil {
			return fmt.Errorf("network: addresses of %s: %w", l.Attrs().Name, err)
		}
		for _, a := range addrs {
			p, ok := netip.AddrFromSlice(a.IP)
			bits, _ := a.Mask.Size()
			if ok && netip.PrefixFrom(p.Unmap(), bits).Masked().Overlaps(h.subnet) {
				return fmt.Errorf("network: subnet %s overlaps %s on bridge %s (another warren daemon's?); give each daemon its own --network-subnet: %w",
					h.subnet, a.IPNet, l.Attrs().Name, errdefs.ErrConflict)
			}
		}
	}
	return nil
}

// heldAddresses returns the addresses (and owners) of the sandboxes an
// earlier run set up, read from their veths' aliases, so that a new sandbox
// never takes the address of one waiting to be adopted.
func (h *hostNet) heldAddresses() (map[netip.Addr]string, error) {
	links, err := h.nl.LinkList()
	if err != nil {
		return nil, fmt.Errorf("network: list interfaces: %w", err)
	}
	held := map[netip.Addr]string{}
	others := h.othersPorts()
	for _, l := range links {
		if id, addr, ok := parseAlias(l.Attrs().Alias); ok && h.isOurVeth(l.Attrs().Name) && !others(l) {
			held[addr] = id
		}
	}
	return held, nil
}

// createVeth makes the pair with its sandbox end (eth0) directly inside the
// sandbox's namespace, and plugs the host end into the bridge as an
// isolated port: isolated ports cannot exchange frames with each other, so
// sandboxes reach each other only through the host's routing, where the
// filter refuses it.
func (h *hostNet) createVeth(id, name string, addr netip.Addr, nsFD int) error {
	br, err := h.nl.LinkByName(h.bridge)
	if err != nil {
		return fmt.Errorf("look up bridge: %w", err)
	}
	la := netlink.NewLinkAttrs()
	la.Name = name
	la.MTU = br.Attrs().MTU
	veth := &netlink.Veth{LinkAttrs: la, PeerName: SandboxInterface, PeerNamespace: netlink.NsFd(nsFD)}
	if err := h.nl.LinkAdd(veth); err != nil {
		return fmt.Errorf("create veth %s: %w", name, err)
	}
	host, err := h.nl.LinkByName(name)
	if err != nil {
		return fmt.Errorf("look up veth %s: %w", name, err)
	}
	// The alias records whose veth this is (the kernel ignores an alias
	// given at creation).
	if err := h.nl.LinkSetAlias(host, vethAlias(id, addr)); err != nil {
		return fmt.Errorf("label veth %s: %w", name, err)
	}
	if err := h.nl.LinkSetMaster(host, br); err != nil {
		return fmt.Errorf("attach %s to %s: %w", name, h.bridge, err)
	}
	if err := h.nl.LinkSetIsolated(host, true); err != nil {
		return fmt.Errorf("isolate bridge port %s: %w", name, err)
	}
	if err := h.nl.LinkSetUp(host); err != nil {
		return fmt.Errorf("bring up %s: %w", name, err)
	}
	return nil
}

// configureSandboxSide runs with inner in the sandbox's namespace: loopback up,
// eth0 with addr/32, an on-link route to the gateway and a default route
// through it. A /32 means the sandbox sends everything, other sandboxes'
// addresses included, to the gateway. It is idempotent (readdress runs it
// on a namespace that may keep some of it).
func (h *hostNet) configureSandboxSide(inner *netlink.Handle, addr netip.Addr) error {
	lo, err := inner.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("look up lo: %w", err)
	}
	if err := inner.LinkSetUp(lo); err != nil {
		return fmt.Errorf("bring up lo: %w", err)
	}
	eth, err := inner.LinkByName(SandboxInterface)
	if err != nil {
		return fmt.Errorf("look up %s: %w", SandboxInterface, err)
	}
	if err := inner.AddrReplace(eth, &netlink.Addr{IPNet: &net.IPNet{IP: addr.AsSlice(), Mask: net.CIDRMask(32, 32)}}); err != nil {
		return fmt.Errorf("address %s: %w", SandboxInterface, err)
	}
	if err := inner.LinkSetUp(eth); err != nil {
		return fmt.Errorf("bring up %s: %w", SandboxInterface, err)
	}
	gw := h.gateway.AsSlice()
	if err := inner.RouteReplace(&netlink.Route{LinkIndex: eth.Attrs().Index, Dst: &net.IPNet{IP: gw, Mask: net.CIDRMask(32, 32)}, Scope: netlink.SCOPE_LINK}); err != nil {
		return fmt.Errorf("route to gateway: %w", err)
	}
	if err := inner.RouteReplace(&netlink.Route{LinkIndex: eth.Attrs().Index, Gw: gw}); err != nil {
		return fmt.Errorf("default route: %w", err)
	}
	return nil
}

// waitOperUp waits until the kernel reports link name operationally up. A
// link set up is not yet usable: the carrier change is handed to the
// kernel's link-watch worker, and until that has run the device drops what
// it is asked to send (its queue is not activated). For a veth that takes
// well under a millisecond; for a bridge that just got its first port, up
// to a second. Without the wait, the first packet of a sandbox connecting
// right after Setup is sometimes lost, and TCP retries it a second later.
func waitOperUp(h *netlink.Handle, name string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for delay := 50 * time.Microsecond; ; delay = min(2*delay, 10*time.Millisecond) {
		l, err := h.LinkByName(name)
		if err != nil {
			return err
		}
		// "unknown" is what a device reports that never went through a
		// carrier change (a new bridge): it was activated when opened.
		if st := l.Attrs().OperState; st == netlink.OperUp || st == netlink.OperUnknown {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s is not up after %v (operstate %s): %w", name, timeout, l.Attrs().OperState, errdefs.ErrUnavailable)
		}
		time.Sleep(delay)
	}
}

// resolvConfNameserver returns the first nameserver of a resolv.conf as
// ip:53.
func resolvConfNameserver(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "nameserver" {
			if a, err := netip.ParseAddr(fields[1]); err == nil && a.Is4() {
				return netip.AddrPortFrom(a, 53).String(), nil
			}
		}
	}
	return "", fmt.Errorf("%s names no IPv4 nameserver: %w", path, errdefs.ErrUnavailable)
}

// isNotFound reports a missing link, address or route.
func isNotFound(err error) bool {
	var nf netlink.LinkNotFoundError
	return errors.As(err, &nf) || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENODEV)
}

// readdress puts a sandbox's address and routes back on its eth0 when they
// are missing. gVisor's runsc (network "sandbox") moves the interface's
// configuration into its own netstack and deletes it from the namespace;
// a later runsc run or restore in the same namespace (a rollback, a wake
// from hibernation) reads the configuration from the interface again, and
// would find none. With the address present it changes nothing.
func (h *hostNet) readdress(id string, addr netip.Addr, nsPath string) error {
	ns, err := netns.GetFromPath(nsPath)
	if err != nil {
		return fmt.Errorf("network of sandbox %s: open namespace: %w", id, err)
	}
	defer ns.Close()
	inner, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("network of sandbox %s: netlink: %w", id, err)
	}
	defer inner.Close()
	eth, err := inner.LinkByName(SandboxInterface)
	if err != nil {
		return fmt.Errorf("network of sandbox %s: look up %s: %w", id, SandboxInterface, err)
	}
	addrs, err := inner.AddrList(eth, netlink.FAMILY_V4)
	if err != nil {
		return fmt.Errorf("network of sandbox %s: list addresses: %w", id, err)
	}
	for _, a := range addrs {
		if a.IP.Equal(addr.AsSlice()) {
			return nil
		}
	}
	if err := h.configureSandboxSide(inner, addr); err != nil {
		return fmt.Errorf("network of sandbox %s: %w", id, err)
	}
	h.log.Debug("network: sandbox readdressed", "sandbox", id, "address", addr)
	return nil
}
