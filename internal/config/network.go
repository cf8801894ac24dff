package config

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/network"
)

// NetworkConfig is how sandboxes that ask for a network get one: a bridge
// with an address range, an uplink to NAT to, a resolver to forward allowed
// names to, and the ranges the operator lets policies open. warren touches
// the host's network only once a sandbox asks for one.
type NetworkConfig struct {
	// Enabled: sandboxes may ask for a network (false: such creates are
	// refused, 501).
	Enabled bool
	// Subnet is where sandbox addresses come from; its first address is
	// the bridge's (the sandboxes' gateway and resolver).
	Subnet string
	// Bridge is the name of warren's bridge.
	Bridge string
	// Table is the name of warren's nftables table (inet family),
	// VethPrefix starts its host-side veths' names, LogGroup is the NFLOG
	// group of its egress audit. Each daemon on a host needs its own of
	// each, as of Bridge, Subnet and RunDir (docs/operations.md).
	Table      string
	VethPrefix string
	LogGroup   uint16
	// Uplink is the interface toward the internet ("" or "auto": the
	// default route's).
	Uplink string
	// DNS is the upstream resolver, ip or ip:port ("": the first
	// nameserver of /etc/resolv.conf).
	DNS string
	// Permit lists ranges inside the always-denied ones (private ranges,
	// link-local) that sandbox policies may nevertheless allow.
	Permit []string
	// NetNS runs the bridge, rules and resolver inside that network
	// namespace instead of the daemon's (tests build a fake host this way).
	NetNS string
	// RunDir holds the sandboxes' namespace mounts ("": /run/warren/network
	// when /run is a tmpfs, else <data-dir>/network-run).
	RunDir string
	// Pools are warm pools of networked sandboxes: TEMPLATE=MIN[:MAX[:TTL]].
	Pools []string
	// EgressProxyPort is the egress proxy's port on the bridge's address
	// (0: no proxy; network rules and secrets then cannot apply).
	EgressProxyPort uint16
	// EgressExtraRoots is a PEM file of CAs the proxy trusts upstream
	// besides the host's store (tests give their fake internet's CA).
	EgressExtraRoots string
	// BuildInternet gives template builds whose request says nothing about
	// the network the internet, as E2B's builds have (false: loopback only,
	// as a create that asks for nothing; docs/templates.md).
	BuildInternet bool
}

// DefaultEgressProxyPort is where the egress proxy listens on the bridge.
const DefaultEgressProxyPort = 15080

// DefaultNetworkSubnet is unlikely to clash with what a host already uses
// (Docker takes 172.17/16, libvirt 192.168.122/24, Kubernetes 10.96/12 and
// 10.244/16).
const DefaultNetworkSubnet = "10.88.0.0/16"

func defaultNetwork() NetworkConfig {
	n := NetworkConfig{Enabled: true, Subnet: DefaultNetworkSubnet, Bridge: network.DefaultBridge,
		Table: network.DefaultTable, VethPrefix: network.DefaultVethPrefix, LogGroup: network.DefaultLogGroup,
		EgressProxyPort: DefaultEgressProxyPort}
	env := func(name string, into *string) {
		if v := os.Getenv(name); v != "" {
			*into = v
		}
	}
	env("WARREN_NETWORK_SUBNET", &n.Subnet)
	env("WARREN_NETWORK_BRIDGE", &n.Bridge)
	env("WARREN_NETWORK_UPLINK", &n.Uplink)
	env("WARREN_NETWORK_DNS", &n.DNS)
	env("WARREN_NETWORK_NETNS", &n.NetNS)
	env("WARREN_NETWORK_RUN_DIR", &n.RunDir)
	env("WARREN_NETWORK_TABLE", &n.Table)
	env("WARREN_NETWORK_VETH_PREFIX", &n.VethPrefix)
	env("WARREN_EGRESS_EXTRA_ROOTS", &n.EgressExtraRoots)
	if v := os.Getenv("WARREN_EGRESS_PROXY_PORT"); v != "" {
		p, _ := strconv.ParseUint(v, 10, 16)
		n.EgressProxyPort = uint16(p)
	}
	if v := os.Getenv("WARREN_NETWORK_LOG_GROUP"); v != "" {
		// A malformed value becomes 0, which Validate refuses.
		g, _ := strconv.ParseUint(v, 10, 16)
		n.LogGroup = uint16(g)
	}
	if v := os.Getenv("WARREN_NETWORK_PERMIT"); v != "" {
		n.Permit = strings.Split(v, ",")
	}
	if v := os.Getenv("WARREN_NETWORK"); v == "false" || v == "0" || v == "off" {
		n.Enabled = false
	}
	if v := os.Getenv("WARREN_TEMPLATE_BUILD_INTERNET"); v == "true" || v == "1" || v == "on" {
		n.BuildInternet = true
	}
	return n
}

func (c *Config) validateNetwork() error {
	n := &c.Network
	sub, err := netip.ParsePrefix(n.Subnet)
	if err != nil || !sub.Addr().Is4() || sub.Bits() < 8 || sub.Bits() > 29 {
		return fmt.Errorf("--network-subnet %q: want an IPv4 CIDR block between /8 and /29, e.g. %s: %w", n.Subnet, DefaultNetworkSubnet, errdefs.ErrInvalid)
	}
	if n.Bridge == "" || len(n.Bridge) >= unix.IFNAMSIZ || strings.ContainsAny(n.Bridge, "/ :") {
		return fmt.Errorf("--network-bridge %q: want an interface name of at most %d characters: %w", n.Bridge, unix.IFNAMSIZ-1, errdefs.ErrInvalid)
	}
	if err := network.CheckTableName(n.Table); err != nil {
		return fmt.Errorf("--network-table: %w", err)
	}
	if err := network.CheckVethPrefix(n.VethPrefix); err != nil {
		return fmt.Errorf("--network-veth-prefix: %w", err)
	}
	if n.LogGroup == 0 {
		return fmt.Errorf("--network-log-group: want a group number from 1 to 65535: %w", errdefs.ErrInvalid)
	}
	if n.Uplink == "auto" {
		n.Uplink = ""
	}
	if n.DNS != "" {
		if a, err := netip.ParseAddr(n.DNS); err == nil {
			n.DNS = netip.AddrPortFrom(a, 53).String()
		}
		if ap, err := netip.ParseAddrPort(n.DNS); err != nil || !ap.Addr().Is4() {
			return fmt.Errorf("--network-dns %q: want an IPv4 address, optionally with :port: %w", n.DNS, errdefs.ErrInvalid)
		}
	}
	if _, err := c.NetworkPermits(); err != nil {
		return err
	}
	if n.NetNS != "" && !filepath.IsAbs(n.NetNS) {
		return fmt.Errorf("--network-netns %q: want an absolute path (e.g. /run/netns/NAME): %w", n.NetNS, errdefs.ErrInvalid)
	}
	if n.EgressProxyPort == 53 || n.EgressProxyPort == 80 || n.EgressProxyPort == 443 {
		return fmt.Errorf("--egress-proxy-port %d: the resolver or the redirected ports use it; pick another (default %d): %w", n.EgressProxyPort, DefaultEgressProxyPort, errdefs.ErrInvalid)
	}
	if n.EgressExtraRoots != "" {
		if _, err := os.Stat(n.EgressExtraRoots); err != nil {
			return fmt.Errorf("--egress-extra-roots: %w: %w", err, errdefs.ErrInvalid)
		}
	}
	n.RunDir = c.NetworkRunDir()
	if !filepath.IsAbs(n.RunDir) {
		return fmt.Errorf("--network-run-dir %q: want an absolute path: %w", n.RunDir, errdefs.ErrInvalid)
	}
	return nil
}

// NetworkSubnet is the parsed --network-subnet (valid after Validate).
func (c *Config) NetworkSubnet() netip.Prefix {
	p, _ := netip.ParsePrefix(c.Network.Subnet)
	return p.Masked()
}

// NetworkPermits parses --network-permit.
func (c *Config) NetworkPermits() ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range c.Network.Permit {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				return nil, fmt.Errorf("--network-permit %q: want a CIDR block or an address: %w", s, errdefs.ErrInvalid)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		if !p.Addr().Is4() {
			return nil, fmt.Errorf("--network-permit %q: sandboxes have IPv4 only: %w", s, errdefs.ErrInvalid)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// NetworkRunDir is --network-run-dir, or its default: /run/warren/network
// when /run is a tmpfs (nothing in it may outlive a reboot: the namespaces
// do not), else <data-dir>/network-run.
func (c *Config) NetworkRunDir() string {
	if c.Network.RunDir != "" {
		return c.Network.RunDir
	}
	var st unix.Statfs_t
	if unix.Statfs("/run", &st) == nil && st.Type == unix.TMPFS_MAGIC {
		return "/run/warren/network"
	}
	return filepath.Join(c.DataDir, "network-run")
}
