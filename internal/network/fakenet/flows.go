package fakenet

import (
	"net/netip"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Flows counts the fake host's conntrack entries by the source address of
// their original direction, for the sources in subnet other than its
// gateway (subnet's first address, the bridge's: the host's own packets,
// such as the bridge's IGMP reports). These are the flows sandboxes opened
// (to the internet, to the resolver), which warren deletes when it removes
// a sandbox's network so that the next owner of an address inherits none.
func (in *Internet) Flows(subnet netip.Prefix) (map[netip.Addr]int, error) {
	h, nl, err := in.hostNetlink()
	if err != nil {
		return nil, err
	}
	defer h.Close()
	defer nl.Close()
	flows, err := nl.ConntrackTableList(netlink.ConntrackTable, unix.AF_INET)
	if err != nil {
		return nil, err
	}
	gateway := subnet.Masked().Addr().Next()
	out := map[netip.Addr]int{}
	for _, f := range flows {
		src, ok := netip.AddrFromSlice(f.Forward.SrcIP)
		if src = src.Unmap(); ok && subnet.Contains(src) && src != gateway {
			out[src]++
		}
	}
	return out, nil
}

// hostNetlink opens the fake host's namespace and a netlink handle in it;
// the caller closes both.
func (in *Internet) hostNetlink() (netns.NsHandle, *netlink.Handle, error) {
	h, err := netns.GetFromPath(in.HostNS)
	if err != nil {
		return h, nil, err
	}
	nl, err := netlink.NewHandleAt(h)
	if err != nil {
		h.Close()
		return h, nil, err
	}
	return h, nl, nil
}
