package fakenet

import (
	"encoding/binary"
	"fmt"

	mdnetlink "github.com/mdlayher/netlink"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// PeerNamespaces counts the live network namespaces the fake host knows by
// an id (its nsid table), other than this internet's own: in practice the
// sandboxes' namespaces. The kernel gives a namespace an id in the host's
// table when the host reports a link whose peer is there (a sandbox's
// veth, as soon as anything looks it up), and drops the id only when that
// namespace dies, not when the veth goes. So a namespace that outlives its
// sandbox's teardown, held by a process, an open descriptor or a mount
// somewhere, still counts here after its veth and its mount in the run
// directory are gone. A namespace's death is finished by a kernel worker
// after its last user has let go: poll for a while before calling a count
// a leak.
func (in *Internet) PeerNamespaces() (int, error) {
	h, err := netns.GetFromPath(in.HostNS)
	if err != nil {
		return 0, err
	}
	defer h.Close()
	ids, err := nsids(h)
	if err != nil {
		return 0, err
	}
	nl, err := netlink.NewHandleAt(h)
	if err != nil {
		return 0, err
	}
	defer nl.Close()
	in.mu.Lock()
	own := append([]string{}, in.ns...)
	in.mu.Unlock()
	for _, path := range own {
		if path == in.HostNS {
			continue
		}
		fd, err := netns.GetFromPath(path)
		if err != nil {
			return 0, err
		}
		// A look-up by descriptor never assigns an id (-1: none).
		id, err := nl.GetNetNsIdByFd(int(fd))
		fd.Close()
		if err != nil {
			return 0, fmt.Errorf("fakenet: id of namespace %s: %w", path, err)
		}
		delete(ids, id)
	}
	return len(ids), nil
}

// nsids dumps the nsid table of the namespace ns (RTM_GETNSID), which the
// netlink package cannot list.
func nsids(ns netns.NsHandle) (map[int]bool, error) {
	c, err := mdnetlink.Dial(unix.NETLINK_ROUTE, &mdnetlink.Config{NetNS: int(ns)})
	if err != nil {
		return nil, fmt.Errorf("fakenet: netlink: %w", err)
	}
	defer c.Close()
	// The body is a struct rtgenmsg, padded to 4 bytes.
	msgs, err := c.Execute(mdnetlink.Message{
		Header: mdnetlink.Header{Type: unix.RTM_GETNSID, Flags: mdnetlink.Request | mdnetlink.Dump},
		Data:   []byte{unix.AF_UNSPEC, 0, 0, 0},
	})
	if err != nil {
		return nil, fmt.Errorf("fakenet: list namespace ids: %w", err)
	}
	ids := map[int]bool{}
	for _, m := range msgs {
		if len(m.Data) < 4 {
			continue
		}
		ad, err := mdnetlink.NewAttributeDecoder(m.Data[4:])
		if err != nil {
			return nil, err
		}
		for ad.Next() {
			if ad.Type() == netlink.NETNSA_NSID && len(ad.Bytes()) == 4 {
				ids[int(int32(binary.NativeEndian.Uint32(ad.Bytes())))] = true
			}
		}
		if err := ad.Err(); err != nil {
			return nil, err
		}
	}
	return ids, nil
}
