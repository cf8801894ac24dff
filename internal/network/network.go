// Package network gives sandboxes a network: a network namespace with a veth
// pair to a warren bridge, an address from a private subnet, NAT to the
// host's uplink, DNS through a resolver on the bridge that answers only the
// names a sandbox may reach, an nftables egress policy that can be replaced
// live, and an audit of every connection attempt.
//
// Everything lives in one nftables table (`inet warren`, see nft.go), host
// veths named wrn<hash> whose alias records the sandbox id and address,
// namespace mounts under <RunDir>/netns, and one bridge. A Manager keeps no
// state the kernel does not also hold, except what the resolver learned and
// the audit: after a daemon restart, New finds what a previous run made,
// Setup adopts a surviving sandbox, and Reconcile removes the rest.
//
// Forwarding is enabled only on the bridge and the uplink (per interface,
// net.ipv4.conf.<if>.forwarding), only where it was off, and recorded in
// <RunDir>/forwarding.json so that Uninstall restores exactly what warren
// changed, even from a later run. When warren turned the uplink's on, the
// ruleset forwards nothing from the uplink but replies toward the bridge,
// so the host does not become a router for the uplink's other neighbours.
//
// Close leaves the kernel state in place (the rules keep confining running
// sandboxes while the daemon restarts); Uninstall removes all of it.
//
// IPv4 only: a sandbox's interface has IPv6 disabled, the resolver strips
// AAAA records, and IPv6 from the bridge is refused. Dual stack would need
// an IPv6 subnet, NAT66 or routed prefixes, and AAAA handling in the
// resolver; nothing an agent needs today depends on it.
package network

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/errdefs"
)

// Options configure a Manager. The operator sets them; nothing in a
// sandbox's request can change them.
type Options struct {
	// RunDir holds namespace mounts (RunDir/netns/<id>) and the record of
	// the forwarding switches warren turned on. Required; keep it on a
	// tmpfs such as /run/warren/network: nothing in it survives a reboot,
	// and neither do the namespaces.
	RunDir string
	// NetNS is the path of the network namespace to work in, the "host" of
	// the sandboxes. Empty means the daemon's own. Tests point it at a
	// throwaway namespace so the real host is never touched.
	NetNS string
	// Bridge is the name of warren's bridge, created if missing.
	Bridge string
	// Subnet is where sandbox addresses come from; its first address is
	// the bridge's (the gateway and nameserver). IPv4, /8 to /29.
	Subnet netip.Prefix
	// Uplink is the interface toward the internet, on which forwarding is
	// enabled. Empty means the interface of the default route.
	Uplink string
	// Upstream is the DNS resolver ("ip:port") the sandboxes' resolver
	// forwards allowed names to. Empty means the first nameserver of
	// /etc/resolv.conf.
	Upstream string
	// Permit lists ranges inside the always-denied ones (private ranges,
	// link-local) that sandbox policies may nevertheless allow, e.g. an
	// internal package mirror. The bridge subnet can never be permitted.
	Permit []netip.Prefix
	// Deny lists further always-denied ranges, e.g. a provider's internal
	// services on public addresses.
	Deny []netip.Prefix
	// LogGroup is the NFLOG group of the audit. It must be free in the
	// namespace. Default 4269.
	LogGroup uint16
	// EventsPerSandbox bounds the audit events kept in memory for each
	// sandbox (oldest dropped first). Default 4096.
	EventsPerSandbox int
	// OnEvent, when set, is called with every audit event, from the
	// audit's or resolver's goroutine: it must not block.
	OnEvent func(Event)
	Log     *slog.Logger
}

const (
	DefaultBridge   = "warren0"
	DefaultLogGroup = 4269
	// vethPrefix names host-side veths: wrn + 12 characters of a hash of
	// the sandbox id (interface names are at most 15 characters).
	vethPrefix = "wrn"
	// aliasPrefix starts the alias of every host veth: "warren:<id>:<addr>".
	aliasPrefix = "warren:"
	// bridgeAlias marks a bridge warren created (and may delete).
	bridgeAlias = aliasPrefix + "bridge"
	// SandboxInterface is the sandbox's side of its veth.
	SandboxInterface = "eth0"
)

// DefaultSubnet is the sandboxes' subnet when Options leave it unset.
var DefaultSubnet = netip.MustParsePrefix("10.87.0.0/16")

// alwaysDenied are the ranges no sandbox policy can open unless the operator
// permits them: "this network", private (RFC 1918) and carrier-grade NAT
// space, loopback, link-local (cloud metadata lives at 169.254.169.254),
// multicast and the reserved block with the limited broadcast address.
var alwaysDenied = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("224.0.0.0/4"),
	netip.MustParsePrefix("240.0.0.0/4"),
}

// Attachment is what a runtime needs to put a sandbox on the network.
type Attachment struct {
	// NetNSPath is the namespace to join (a bind mount; open it and setns,
	// or give it to libcontainer as the network namespace's path).
	NetNSPath string
	// Interface is the sandbox's interface (already configured and up).
	Interface string
	// Address is the sandbox's address (configured as a /32).
	Address netip.Addr
	// Gateway is the bridge's address: the default route and the DNS
	// server to write into the sandbox's /etc/resolv.conf.
	Gateway netip.Addr
	// HostVeth is the host side of the veth pair.
	HostVeth string
}

// Manager owns warren's network state in one network namespace.
type Manager struct {
	opts     Options
	log      *slog.Logger
	hostNS   netns.NsHandle
	nl       *netlink.Handle
	nft      *nftRules
	netnsDir string
	gateway  netip.Addr
	reserved spans
	uplink   string

	// opMu serializes Setup, Update, Teardown and Reconcile; nftMu every
	// nftables transaction (the resolver's too); mu the maps below. Lock
	// order: opMu, nftMu, mu.
	opMu      sync.Mutex
	nftMu     sync.Mutex
	mu        sync.RWMutex
	sandboxes map[string]*sandbox
	byAddr    map[netip.Addr]*sandbox
	used      map[netip.Addr]string // addresses in use, including not-yet-adopted sandboxes
	cursor    uint32                // the next address to try

	events  *events
	nflog   *nflog
	dns     *resolver
	wg      sync.WaitGroup
	closing atomic.Bool
	closed  bool
}

// New prepares the bridge, the nftables table, forwarding, the audit and the
// resolver, and finds the sandboxes an earlier run left.
func New(opts Options) (_ *Manager, err error) {
	if err := opts.withDefaults(); err != nil {
		return nil, err
	}
	m := &Manager{
		opts:      opts,
		log:       opts.Log,
		netnsDir:  filepath.Join(opts.RunDir, "netns"),
		sandboxes: map[string]*sandbox{},
		byAddr:    map[netip.Addr]*sandbox{},
		used:      map[netip.Addr]string{},
		events:    &events{capacity: opts.EventsPerSandbox, rings: map[string]*eventRing{}, onEvent: opts.OnEvent},
	}
	m.gateway = opts.Subnet.Addr().Next()
	m.cursor = v4(m.gateway) + 1
	bridgeNet := spansOf(opts.Subnet)
	m.reserved = spansOf(append(append([]netip.Prefix{}, alwaysDenied...), opts.Deny...)...).
		minus(spansOf(opts.Permit...)).union(bridgeNet)

	defer func() {
		if err != nil {
			m.Close()
		}
	}()
	if err := m.openHost(); err != nil {
		return nil, err
	}
	if m.uplink, err = m.findUplink(); err != nil {
		return nil, err
	}
	createdBridge, err := m.ensureBridge()
	if err != nil {
		return nil, err
	}
	if err := m.installRules(createdBridge); err != nil {
		return nil, err
	}
	if err := m.scanAddresses(); err != nil {
		return nil, err
	}
	if m.nflog, err = openNFLOG(int(m.hostNS), opts.LogGroup); err != nil {
		return nil, err
	}
	m.wg.Add(1)
	go m.readAudit()
	if m.dns, err = m.startResolver(m.gateway); err != nil {
		return nil, err
	}
	m.log.Info("network ready", "bridge", opts.Bridge, "subnet", opts.Subnet, "uplink", m.uplink, "upstream_dns", opts.Upstream)
	return m, nil
}

// openHost makes the run directory and the namespaces' mount directory,
// and opens the host's network namespace and a netlink handle in it.
func (m *Manager) openHost() error {
	var err error
	if err := os.MkdirAll(m.opts.RunDir, 0o700); err != nil {
		return fmt.Errorf("create run dir: %w", err)
	}
	if _, err := makeSharedMountDir(m.netnsDir); err != nil {
		return err
	}
	if m.opts.NetNS == "" {
		m.hostNS, err = netns.GetFromPath("/proc/self/ns/net")
	} else {
		m.hostNS, err = netns.GetFromPath(m.opts.NetNS)
	}
	if err != nil {
		return fmt.Errorf("open network namespace %q: %w", m.opts.NetNS, err)
	}
	if m.nl, err = netlink.NewHandleAt(m.hostNS, unix.NETLINK_ROUTE, unix.NETLINK_NETFILTER); err != nil {
		return fmt.Errorf("netlink: %w", err)
	}
	return nil
}

// installRules installs warren's nftables table, then turns on forwarding
// (createdBridge: the bridge is new this run).
func (m *Manager) installRules(createdBridge bool) error {
	conn, err := nftables.New(nftables.AsLasting(), nftables.WithNetNSFd(int(m.hostNS)))
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	guard, err := m.uplinkForwardingIsOurs()
	if err != nil {
		return err
	}
	m.nft = &nftRules{
		conn: conn, table: &nftables.Table{Name: tableName, Family: nftables.TableFamilyINet},
		group: m.opts.LogGroup, bridge: m.opts.Bridge, gateway: m.gateway, subnet: m.opts.Subnet, reserved: m.reserved,
		uplink: m.uplink, guardUplink: guard,
	}
	// Rules before forwarding: there is never a moment when the host
	// forwards for the bridge without the filter in place.
	if err := m.nft.install(); err != nil {
		return err
	}
	if err := m.enableForwarding(createdBridge); err != nil {
		return err
	}
	return nil
}

func (o *Options) withDefaults() error {
	if o.RunDir == "" {
		return fmt.Errorf("network: RunDir is required: %w", errdefs.ErrInvalid)
	}
	if o.Bridge == "" {
		o.Bridge = DefaultBridge
	}
	if len(o.Bridge) >= unix.IFNAMSIZ {
		return fmt.Errorf("network: bridge name %q is longer than %d characters: %w", o.Bridge, unix.IFNAMSIZ-1, errdefs.ErrInvalid)
	}
	if !o.Subnet.IsValid() {
		o.Subnet = DefaultSubnet
	}
	if !o.Subnet.Addr().Is4() || o.Subnet.Bits() < 8 || o.Subnet.Bits() > 29 {
		return fmt.Errorf("network: subnet %s must be IPv4, between /8 and /29: %w", o.Subnet, errdefs.ErrInvalid)
	}
	o.Subnet = o.Subnet.Masked()
	if o.Upstream == "" {
		up, err := resolvConfNameserver("/etc/resolv.conf")
		if err != nil {
			return fmt.Errorf("network: no upstream DNS resolver given and %w", err)
		}
		o.Upstream = up
	}
	if _, err := netip.ParseAddrPort(o.Upstream); err != nil {
		return fmt.Errorf("network: upstream DNS resolver %q must be ip:port: %w", o.Upstream, errdefs.ErrInvalid)
	}
	if o.LogGroup == 0 {
		o.LogGroup = DefaultLogGroup
	}
	if o.EventsPerSandbox <= 0 {
		o.EventsPerSandbox = 4096
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return nil
}

// Close stops the resolver and the audit and releases the manager's handles.
// It leaves the kernel state alone: the rules keep confining the sandboxes,
// which keep running across a daemon restart, and the next New picks the
// state up. Uninstall removes it.
func (m *Manager) Close() error {
	m.opMu.Lock()
	defer m.opMu.Unlock()
	return m.closeLocked()
}

func (m *Manager) closeLocked() error {
	if m.closed {
		return nil
	}
	m.closed = true
	m.closing.Store(true)
	if m.dns != nil {
		m.dns.stop()
	}
	var errs []error
	if m.nflog != nil {
		errs = append(errs, m.nflog.close())
	}
	m.wg.Wait()
	if m.nft != nil {
		errs = append(errs, m.nft.conn.CloseLasting())
	}
	if m.nl != nil {
		m.nl.Close()
	}
	if m.hostNS.IsOpen() {
		m.hostNS.Close()
	}
	return errors.Join(errs...)
}

// errClosed is what every operation on a closed manager returns.
var errClosed = fmt.Errorf("network: manager is closed: %w", errdefs.ErrUnavailable)

// Uninstall removes everything warren made in the namespace: every
// sandbox's network, the nftables table, the bridge (if warren created it),
// the forwarding it enabled, and the namespace mounts; then closes the
// manager.
func (m *Manager) Uninstall(ctx context.Context) error {
	m.opMu.Lock()
	defer m.opMu.Unlock()
	if m.closed {
		return errClosed
	}
	var errs []error
	errs = append(errs, m.reconcileLocked(ctx, nil))
	// Forwarding off before the filter goes.
	errs = append(errs, m.restoreForwarding())
	m.nftMu.Lock()
	errs = append(errs, m.nft.remove())
	m.nftMu.Unlock()
	if br, err := m.nl.LinkByName(m.opts.Bridge); err == nil && br.Attrs().Alias == bridgeAlias {
		if err := m.nl.LinkDel(br); err != nil {
			errs = append(errs, fmt.Errorf("delete bridge %s: %w", m.opts.Bridge, err))
		}
	}
	if err := unix.Unmount(m.netnsDir, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
		errs = append(errs, fmt.Errorf("unmount %s: %w", m.netnsDir, err))
	}
	_ = os.Remove(m.netnsDir)
	errs = append(errs, m.closeLocked())
	return errors.Join(errs...)
}

// inHostNS runs fn where sockets it opens belong to the manager's
// namespace. Without Options.NetNS every thread already is there.
func (m *Manager) inHostNS(fn func() error) error {
	if m.opts.NetNS == "" {
		return fn()
	}
	return inNetNS(m.hostNS, fn)
}

// Gateway is the bridge's address: the sandboxes' gateway and nameserver.
func (m *Manager) Gateway() netip.Addr { return m.gateway }
