package network

import (
	"fmt"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/errdefs"
)

// Probe reports whether New could work with opts, without changing
// anything: the namespace opens, the uplink is found, the upstream resolver
// is known and the kernel speaks nftables. A daemon that starts its Manager
// only when a sandbox first asks for a network uses it to say up front
// whether networking is there.
func Probe(opts Options) error {
	if err := opts.withDefaults(); err != nil {
		return err
	}
	var ns netns.NsHandle
	var err error
	if opts.NetNS == "" {
		ns, err = netns.GetFromPath("/proc/self/ns/net")
	} else {
		ns, err = netns.GetFromPath(opts.NetNS)
	}
	if err != nil {
		return fmt.Errorf("network: open network namespace %q: %w", opts.NetNS, errdefs.ErrUnavailable)
	}
	defer ns.Close()
	nl, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("network: netlink: %w: %w", err, errdefs.ErrUnavailable)
	}
	defer nl.Close()
	h := &hostNet{nl: nl}
	if _, err := h.findUplink(opts.Uplink); err != nil {
		return fmt.Errorf("%w: %w", err, errdefs.ErrUnavailable)
	}
	conn, err := nftables.New(nftables.WithNetNSFd(int(ns)))
	if err != nil {
		return fmt.Errorf("network: nftables: %w: %w", err, errdefs.ErrUnavailable)
	}
	if _, err := conn.ListTablesOfFamily(nftables.TableFamilyINet); err != nil {
		return fmt.Errorf("network: the kernel does not answer nftables requests (nf_tables missing?): %w: %w", err, errdefs.ErrUnavailable)
	}
	return nil
}
