package network

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// linkUpTimeout bounds the wait for a new link to be usable.
const linkUpTimeout = 3 * time.Second

// hostNet is warren's hold on the namespace it serves (the "host" of the
// sandboxes): the handles into it, the bridge and the uplink, and the
// sandboxes' namespaces and veths, with the conntrack entries and sockets
// their connections leave. It keeps no per-sandbox state: the kernel and
// the run directory hold it.
type hostNet struct {
	netnsPath string         // Options.NetNS: empty is the daemon's own
	ns        netns.NsHandle // the host namespace
	nl        *netlink.Handle
	netnsDir  string // the sandboxes' namespace mounts
	bridge    string
	// vethPrefix and subnet tell this manager's veths from another
	// daemon's in the same namespace.
	vethPrefix string
	subnet     netip.Prefix
	gateway    netip.Addr
	uplink     string
	log        *slog.Logger
}

func newHostNet(opts Options, gateway netip.Addr) *hostNet {
	return &hostNet{
		netnsPath: opts.NetNS, ns: -1, netnsDir: filepath.Join(opts.RunDir, "netns"),
		bridge: opts.Bridge, vethPrefix: opts.VethPrefix, subnet: opts.Subnet, gateway: gateway, log: opts.Log,
	}
}

// open makes the run directory and the namespaces' mount directory, and
// opens the host's network namespace and a netlink handle in it.
func (h *hostNet) open(runDir string) error {
	var err error
	if err := os.MkdirAll(runDir, 0o700); err != nil {
		return fmt.Errorf("create run dir: %w", err)
	}
	if _, err := makeSharedMountDir(h.netnsDir); err != nil {
		return err
	}
	if h.netnsPath == "" {
		h.ns, err = netns.GetFromPath("/proc/self/ns/net")
	} else {
		h.ns, err = netns.GetFromPath(h.netnsPath)
	}
	if err != nil {
		return fmt.Errorf("open network namespace %q: %w", h.netnsPath, err)
	}
	if h.nl, err = netlink.NewHandleAt(h.ns, unix.NETLINK_ROUTE, unix.NETLINK_NETFILTER); err != nil {
		return fmt.Errorf("netlink: %w", err)
	}
	return nil
}

func (h *hostNet) close() {
	if h.nl != nil {
		h.nl.Close()
	}
	if h.ns.IsOpen() {
		h.ns.Close()
	}
}

// inHostNS runs fn where sockets it opens belong to the served namespace.
// Without Options.NetNS every thread already is there.
func (h *hostNet) inHostNS(fn func() error) error {
	if h.netnsPath == "" {
		return fn()
	}
	return inNetNS(h.ns, fn)
}

func (h *hostNet) nsPath(id string) string { return filepath.Join(h.netnsDir, id) }

// plug makes sb's namespace at sb.nsPath, its veth (named sb.veth) on the
// bridge and its eth0 configured with sb.addr, and waits until both ends
// are up. On an error nothing of it is left; unplug removes it later.
func (h *hostNet) plug(sb *sandbox) (unplug func(), err error) {
	var undo []func()
	unplug = func() {
		for _, f := range slices.Backward(undo) {
			f()
		}
	}
	defer func() {
		if err != nil {
			unplug()
		}
	}()
	// The namespace is configured from a netlink socket opened inside it
	// while the creating thread is still there: no second setns.
	var inner *netlink.Handle
	nsh, err := createNetNS(sb.nsPath, func() error {
		// Interfaces made in this namespace from now on (eth0) get no
		// IPv6; loopback keeps ::1.
		if err := writeSysctl("net/ipv6/conf/default/disable_ipv6", "1"); err != nil {
			return fmt.Errorf("disable IPv6: %w", err)
		}
		nh, err := netlink.NewHandle()
		inner = nh
		return err
	})
	if err != nil {
		return nil, err
	}
	defer nsh.Close()
	defer inner.Close()
	undo = append(undo, func() { _ = removeNetNSMount(sb.nsPath) })

	if err := h.createVeth(sb.id, sb.veth, sb.addr, int(nsh)); err != nil {
		return nil, err
	}
	undo = append(undo, func() {
		if l, err := h.nl.LinkByName(sb.veth); err == nil {
			_ = h.nl.LinkDel(l)
		}
	})
	if err := h.configureSandboxSide(inner, sb.addr); err != nil {
		return nil, err
	}
	if err := errors.Join(waitOperUp(h.nl, sb.veth, linkUpTimeout), waitOperUp(inner, SandboxInterface, linkUpTimeout)); err != nil {
		return nil, err
	}
	if err := waitOperUp(h.nl, h.bridge, linkUpTimeout); err != nil {
		// Not fatal: the bridge's queue starts at the latest when the
		// kernel's link watch runs; the first packets may be retried.
		h.log.Warn("network: bridge not up yet", "bridge", h.bridge, "err", err)
	}
	return unplug, nil
}

// plugged finds a sandbox an earlier run set up completely: its veth
// (whose alias gives the address) and its namespace mount.
func (h *hostNet) plugged(id string) (*sandbox, bool) {
	name := h.vethName(id)
	l, err := h.nl.LinkByName(name)
	if err != nil {
		return nil, false
	}
	aid, addr, ok := parseAlias(l.Attrs().Alias)
	if !ok || aid != id {
		return nil, false
	}
	path := h.nsPath(id)
	nsh, err := netns.GetFromPath(path)
	if err != nil {
		return nil, false
	}
	nsh.Close()
	// Whatever an earlier policy let it open may still be open.
	return &sandbox{id: id, addr: addr, veth: name, nsPath: path, names: map[netip.Addr]nameEntry{}, mayHaveFlows: true}, true
}

// hasLeftovers reports whether a veth or a namespace mount point of
// sandbox id is there.
func (h *hostNet) hasLeftovers(id string) bool {
	if _, err := h.nl.LinkByName(h.vethName(id)); err == nil {
		return true
	}
	_, err := os.Lstat(h.nsPath(id))
	return err == nil
}

// unplug removes sandbox id's veth and namespace mount, if there.
func (h *hostNet) unplug(id string) error {
	var errs []error
	if l, err := h.nl.LinkByName(h.vethName(id)); err == nil {
		if err := h.nl.LinkDel(l); err != nil && !isNotFound(err) {
			errs = append(errs, fmt.Errorf("delete veth %s: %w", l.Attrs().Name, err))
		}
	} else if !isNotFound(err) {
		errs = append(errs, err)
	}
	errs = append(errs, removeNetNSMount(h.nsPath(id)))
	return errors.Join(errs...)
}

// pluggedIDs adds to found the sandboxes that have a veth or a namespace
// mount point, and deletes veths that are this manager's by name but whose
// alias does not say whose (nothing can adopt those). It fails (err) only
// when it cannot list the interfaces; what it could not read or delete
// otherwise is in partial.
func (h *hostNet) pluggedIDs(found map[string]bool) (partial, err error) {
	links, err := h.nl.LinkList()
	if err != nil {
		return nil, fmt.Errorf("network: list interfaces: %w", err)
	}
	others := h.othersPorts()
	var errs []error
	for _, l := range links {
		name := l.Attrs().Name
		if l.Type() != "veth" || !h.isOurVeth(name) || others(l) {
			continue
		}
		id, _, ok := parseAlias(l.Attrs().Alias)
		if !ok || h.vethName(id) != name {
			if err := h.nl.LinkDel(l); err != nil && !isNotFound(err) {
				errs = append(errs, fmt.Errorf("delete stray veth %s: %w", name, err))
			}
			continue
		}
		found[id] = true
	}
	entries, err := os.ReadDir(h.netnsDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	for _, e := range entries {
		found[e.Name()] = true
	}
	return errors.Join(errs...), nil
}

// othersPorts returns a test for a veth plugged into another bridge than
// ours: another daemon's in this namespace, should it share our veth
// prefix by mistake; its veths are not ours to adopt or delete. (Ours
// hang on our bridge, or on none while half-made or after the bridge was
// renamed.)
func (h *hostNet) othersPorts() func(netlink.Link) bool {
	ours := 0
	if br, err := h.nl.LinkByName(h.bridge); err == nil {
		ours = br.Attrs().Index
	}
	return func(l netlink.Link) bool {
		m := l.Attrs().MasterIndex
		return m != 0 && m != ours && ours != 0
	}
}

// uninstall deletes the bridge (if warren created it) and the namespaces'
// mount directory.
func (h *hostNet) uninstall() error {
	var errs []error
	if br, err := h.nl.LinkByName(h.bridge); err == nil && br.Attrs().Alias == bridgeAlias {
		if err := h.nl.LinkDel(br); err != nil {
			errs = append(errs, fmt.Errorf("delete bridge %s: %w", h.bridge, err))
		}
	}
	if err := unix.Unmount(h.netnsDir, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
		errs = append(errs, fmt.Errorf("unmount %s: %w", h.netnsDir, err))
	}
	_ = os.Remove(h.netnsDir)
	return errors.Join(errs...)
}
