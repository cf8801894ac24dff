// Package network gives sandboxes a network: a network namespace with a veth
// pair to a warren bridge, an address from a private subnet, NAT to the
// host's uplink, DNS through a resolver on the bridge that answers only the
// names a sandbox may reach, an nftables egress policy that can be replaced
// live, and an audit of every connection attempt.
//
// Everything lives in one nftables table (`inet warren`, see nft.go), host
// veths named wrn<hash> whose alias records the sandbox id and address,
// namespace mounts under <RunDir>/netns, and one bridge. The table, the veth
// prefix, the bridge, the subnet, the run directory and the NFLOG group are
// Options, so that several daemons can share one namespace: each finds,
// adopts and removes only what carries its own names (and, for veths, an
// address in its own subnet). A Manager keeps no
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
	"strings"
	"sync"

	"github.com/google/nftables"
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
	// Table is the name of warren's nftables table (family inet). Default
	// "warren". Daemons sharing a namespace need one each: Uninstall
	// deletes the whole table.
	Table string
	// VethPrefix starts the name of every host-side veth (1 to 3
	// characters: the 12-character hash of the sandbox id follows, and an
	// interface name has at most 15). Default "wrn". Daemons sharing a
	// namespace need one each: Reconcile deletes a veth with this prefix
	// whose alias does not name a sandbox.
	VethPrefix string
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
	// ProxyPort is the egress proxy's port on the gateway (0: none). The
	// TCP to ports 80 and 443 of sandboxes whose policy has rules is
	// redirected to it; the caller serves it (ListenProxy).
	ProxyPort uint16
	// OnEvent, when set, is called with every audit event, from the
	// audit's or resolver's goroutine: it must not block.
	OnEvent func(Event)
	Log     *slog.Logger
}

const (
	DefaultBridge   = "warren0"
	DefaultTable    = "warren"
	DefaultLogGroup = 4269
	// DefaultVethPrefix names host-side veths: wrn + 12 characters of a
	// hash of the sandbox id (interface names are at most 15 characters).
	DefaultVethPrefix = "wrn"
	// vethHashLen is the length of the hash after the prefix.
	vethHashLen = 12
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

// Manager owns warren's network state in one network namespace. It is the
// one entry point; each job is a type of its own that it composes (see
// docs/architecture.md): hostNet (namespaces, veths, the bridge, conntrack),
// forwarder (the forwarding switches), addrPool (addresses), registry (the
// sandboxes and their policy state), ruleset (nftables), audit (NFLOG),
// resolver (DNS) and events (the audit's memory).
//
// Lock order: opMu, ruleset.mu, registry.mu; addrPool's and events' locks
// are leaves.
type Manager struct {
	opts   Options
	log    *slog.Logger
	host   *hostNet
	fwd    *forwarder
	addrs  *addrPool
	reg    *registry
	rules  *ruleset
	events *events
	audit  *audit
	dns    *resolver

	// opMu serializes Setup, Update, Teardown, Reconcile and Close.
	opMu   sync.Mutex
	closed bool
}

// New prepares the bridge, the nftables table, forwarding, the audit and the
// resolver, and finds the sandboxes an earlier run left.
func New(opts Options) (_ *Manager, err error) {
	if err := opts.withDefaults(); err != nil {
		return nil, err
	}
	gateway := opts.Subnet.Addr().Next()
	reserved := spansOf(append(append([]netip.Prefix{}, alwaysDenied...), opts.Deny...)...).
		minus(spansOf(opts.Permit...)).union(spansOf(opts.Subnet))
	m := &Manager{
		opts:   opts,
		log:    opts.Log,
		host:   newHostNet(opts, gateway),
		addrs:  newAddrPool(opts.Subnet, gateway),
		reg:    newRegistry(reserved),
		events: &events{capacity: opts.EventsPerSandbox, rings: map[string]*eventRing{}, onEvent: opts.OnEvent},
	}
	defer func() {
		if err != nil {
			m.Close()
		}
	}()
	if err := m.host.open(opts.RunDir); err != nil {
		return nil, err
	}
	if m.host.uplink, err = m.host.findUplink(opts.Uplink); err != nil {
		return nil, err
	}
	m.fwd = &forwarder{runDir: opts.RunDir, ns: m.host.ns, bridge: opts.Bridge, uplink: m.host.uplink, log: m.log}
	if err := m.host.checkSubnetFree(); err != nil {
		return nil, err
	}
	createdBridge, err := m.host.ensureBridge()
	if err != nil {
		return nil, err
	}
	if err := m.installRules(createdBridge, reserved); err != nil {
		return nil, err
	}
	held, err := m.host.heldAddresses()
	if err != nil {
		return nil, err
	}
	for addr, id := range held {
		m.addrs.hold(addr, id)
	}
	if m.audit, err = startAudit(int(m.host.ns), opts.LogGroup, m.events, m.reg, m.log); err != nil {
		return nil, err
	}
	dns := &resolver{policy: m.rules, events: m.events, host: m.host, gateway: gateway, upstream: opts.Upstream, log: m.log}
	if err := dns.start(); err != nil {
		return nil, err
	}
	m.dns = dns
	m.log.Info("network ready", "bridge", opts.Bridge, "subnet", opts.Subnet, "uplink", m.host.uplink, "upstream_dns", opts.Upstream)
	return m, nil
}

// installRules installs warren's nftables table, then turns on forwarding
// (createdBridge: the bridge is new this run).
func (m *Manager) installRules(createdBridge bool, reserved spans) error {
	conn, err := nftables.New(nftables.AsLasting(), nftables.WithNetNSFd(int(m.host.ns)))
	if err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	guard, err := m.fwd.uplinkIsOurs()
	if err != nil {
		return err
	}
	nft := &nftRules{
		conn: conn, table: &nftables.Table{Name: m.opts.Table, Family: nftables.TableFamilyINet},
		group: m.opts.LogGroup, bridge: m.opts.Bridge, gateway: m.host.gateway, subnet: m.opts.Subnet, reserved: reserved,
		uplink: m.host.uplink, guardUplink: guard, proxyPort: m.opts.ProxyPort,
	}
	m.rules = &ruleset{nft: nft, reg: m.reg}
	// Rules before forwarding: there is never a moment when the host
	// forwards for the bridge without the filter in place.
	if err := nft.install(); err != nil {
		return err
	}
	if err := m.fwd.enable(createdBridge); err != nil {
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
	if err := o.namesWithDefaults(); err != nil {
		return err
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

// namesWithDefaults fills and checks the table's name and the veth prefix.
func (o *Options) namesWithDefaults() error {
	if o.Table == "" {
		o.Table = DefaultTable
	}
	if err := CheckTableName(o.Table); err != nil {
		return err
	}
	if o.VethPrefix == "" {
		o.VethPrefix = DefaultVethPrefix
	}
	return CheckVethPrefix(o.VethPrefix)
}

// CheckTableName checks an nftables table name warren may own: letters,
// digits, '_' and '-', at most 32 characters.
func CheckTableName(name string) error {
	if name == "" || len(name) > 32 || strings.IndexFunc(name, notNameChar) >= 0 {
		return fmt.Errorf("network: nftables table name %q: want 1 to 32 letters, digits, '_' or '-': %w", name, errdefs.ErrInvalid)
	}
	return nil
}

// CheckVethPrefix checks a veth prefix: 1 to 3 letters or digits, so that
// prefix and hash fit an interface name. Two different prefixes never match
// each other's veths (the length differs or a character does).
func CheckVethPrefix(p string) error {
	if p == "" || len(p)+vethHashLen >= unix.IFNAMSIZ || strings.IndexFunc(p, notNameChar) >= 0 || strings.ContainsAny(p, "_-") {
		return fmt.Errorf("network: veth prefix %q: want 1 to %d letters or digits: %w", p, unix.IFNAMSIZ-1-vethHashLen, errdefs.ErrInvalid)
	}
	return nil
}

func notNameChar(r rune) bool {
	return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-')
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
	if m.dns != nil {
		m.dns.stop()
	}
	var errs []error
	if m.audit != nil {
		errs = append(errs, m.audit.close())
	}
	if m.rules != nil {
		errs = append(errs, m.rules.close())
	}
	m.host.close()
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
	errs = append(errs, m.fwd.restore())
	errs = append(errs, m.rules.uninstall())
	errs = append(errs, m.host.uninstall())
	errs = append(errs, m.closeLocked())
	return errors.Join(errs...)
}

// Gateway is the bridge's address: the sandboxes' gateway and nameserver.
func (m *Manager) Gateway() netip.Addr { return m.host.gateway }
