package network

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// flowFilter selects conntrack entries opened by one sandbox address.
type flowFilter struct {
	src  netip.Addr
	drop func(dst netip.Addr) bool
}

func (f flowFilter) MatchConntrackFlow(flow *netlink.ConntrackFlow) bool {
	src, ok1 := netip.AddrFromSlice(flow.Forward.SrcIP)
	dst, ok2 := netip.AddrFromSlice(flow.Forward.DstIP)
	if !ok1 || !ok2 || src.Unmap() != f.src {
		return false
	}
	return f.drop(dst.Unmap())
}

// cut ends the connections of the sandbox at addr that its policy now
// denies (policyDenies; the resolver on the gateway is never cut). Deleting the conntrack entry is what enforces it: the next packet
// either way is no longer "established", so the sandbox's is judged by the
// new rules and answered with a reset, and the remote side's no longer
// matches the NAT mapping. Destroying the sandbox's socket (SOCK_DESTROY,
// through sock_diag inside its namespace) makes the cut immediate for a
// program that is only reading: it gets ECONNABORTED instead of waiting on
// a peer whose packets no longer arrive. Runtimes whose sockets are not
// kernel sockets (gVisor's netstack) get the first half only.
func (h *hostNet) cut(ctx context.Context, addr netip.Addr, nsPath string, policyDenies func(netip.Addr) bool) error {
	denied := func(dst netip.Addr) bool {
		if dst == h.gateway {
			return false // the resolver
		}
		return policyDenies(dst)
	}
	var errs []error
	n, err := h.nl.ConntrackDeleteFilters(netlink.ConntrackTable, unix.AF_INET, flowFilter{src: addr, drop: denied})
	if err != nil {
		errs = append(errs, fmt.Errorf("delete conntrack entries: %w", err))
	}
	killed, err := destroySockets(nsPath, addr, denied)
	if err != nil {
		errs = append(errs, err)
	}
	if n > 0 || killed > 0 {
		h.log.Debug("network: cut connections the new policy denies", "address", addr, "conntrack_entries", n, "sockets", killed)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("network: cut denied connections of %s: %w", addr, err)
	}
	return nil
}

// destroySockets destroys the TCP sockets in the namespace at nsPath that
// are connected through addr to a destination denied reports.
func destroySockets(nsPath string, addr netip.Addr, denied func(netip.Addr) bool) (int, error) {
	ns, err := netns.GetFromPath(nsPath)
	if err != nil {
		return 0, fmt.Errorf("open sandbox netns: %w", err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_INET_DIAG)
	if err != nil {
		return 0, fmt.Errorf("sock_diag in sandbox netns: %w", err)
	}
	defer h.Close()
	socks, err := h.SocketDiagTCP(unix.AF_INET)
	if err != nil && !errors.Is(err, netlink.ErrDumpInterrupted) {
		return 0, fmt.Errorf("list sandbox sockets: %w", err)
	}
	killed := 0
	var errs []error
	for _, s := range socks {
		src, _ := netip.AddrFromSlice(s.ID.Source)
		dst, _ := netip.AddrFromSlice(s.ID.Destination)
		// Only sockets going out through eth0: not listeners, not loopback.
		if src.Unmap() != addr || !dst.IsValid() || dst.IsUnspecified() || !denied(dst.Unmap()) {
			continue
		}
		err := h.SocketDestroy(
			&net.TCPAddr{IP: s.ID.Source, Port: int(s.ID.SourcePort)},
			&net.TCPAddr{IP: s.ID.Destination, Port: int(s.ID.DestinationPort)})
		if err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("destroy socket to %s: %w", dst, err))
			continue
		}
		killed++
	}
	return killed, errors.Join(errs...)
}

// forgetFlows deletes every conntrack entry opened from the addresses of
// sandboxes being removed, so that the next owner of an address inherits
// none.
func (h *hostNet) forgetFlows(addrs ...netip.Addr) error {
	set := map[netip.Addr]bool{}
	for _, a := range addrs {
		set[a] = true
	}
	_, err := h.nl.ConntrackDeleteFilters(netlink.ConntrackTable, unix.AF_INET, srcFilter(set))
	if err != nil {
		return fmt.Errorf("delete conntrack entries of %v: %w", addrs, err)
	}
	return nil
}

type srcFilter map[netip.Addr]bool

func (f srcFilter) MatchConntrackFlow(flow *netlink.ConntrackFlow) bool {
	src, ok := netip.AddrFromSlice(flow.Forward.SrcIP)
	return ok && f[src.Unmap()]
}
