package config

import (
	"net/netip"
	"path/filepath"
	"testing"
)

func TestValidateNetwork(t *testing.T) {
	c := Config{DataDir: "/var/lib/warren", Network: defaultNetwork()}
	c.Network.DNS = "203.0.113.53"
	c.Network.Uplink = "auto"
	c.Network.Permit = []string{"10.1.2.0/24", "192.168.1.10"}
	if err := c.validateNetwork(); err != nil {
		t.Fatal(err)
	}
	if c.Network.DNS != "203.0.113.53:53" || c.Network.Uplink != "" || c.NetworkSubnet() != netip.MustParsePrefix(DefaultNetworkSubnet) {
		t.Fatalf("normalized: %+v", c.Network)
	}
	if p, _ := c.NetworkPermits(); len(p) != 2 || p[1] != netip.MustParsePrefix("192.168.1.10/32") {
		t.Fatalf("permits: %v", p)
	}
	if !filepath.IsAbs(c.Network.RunDir) {
		t.Fatalf("run dir %q", c.Network.RunDir)
	}
	for name, mutate := range map[string]func(*NetworkConfig){
		"ipv6 subnet":    func(n *NetworkConfig) { n.Subnet = "fd00::/64" },
		"tiny subnet":    func(n *NetworkConfig) { n.Subnet = "10.0.0.0/30" },
		"bad dns":        func(n *NetworkConfig) { n.DNS = "resolver.example" },
		"long bridge":    func(n *NetworkConfig) { n.Bridge = "a-very-long-bridge-name" },
		"bad permit":     func(n *NetworkConfig) { n.Permit = []string{"nope"} },
		"ipv6 permit":    func(n *NetworkConfig) { n.Permit = []string{"fd00::/8"} },
		"relative netns": func(n *NetworkConfig) { n.NetNS = "netns/x" },
		"bad table":      func(n *NetworkConfig) { n.Table = "in et" },
		"long prefix":    func(n *NetworkConfig) { n.VethPrefix = "wrnx" },
		"no log group":   func(n *NetworkConfig) { n.LogGroup = 0 },
	} {
		c := Config{DataDir: "/var/lib/warren", Network: defaultNetwork()}
		mutate(&c.Network)
		if err := c.validateNetwork(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// A single daemon keeps today's names; the environment gives another
// daemon its own.
func TestNetworkNames(t *testing.T) {
	n := defaultNetwork()
	if n.Bridge != "warren0" || n.Table != "warren" || n.VethPrefix != "wrn" || n.LogGroup != 4269 {
		t.Fatalf("defaults: %+v", n)
	}
	t.Setenv("WARREN_NETWORK_TABLE", "warren-b")
	t.Setenv("WARREN_NETWORK_VETH_PREFIX", "wrb")
	t.Setenv("WARREN_NETWORK_LOG_GROUP", "4270")
	if n := defaultNetwork(); n.Table != "warren-b" || n.VethPrefix != "wrb" || n.LogGroup != 4270 {
		t.Fatalf("from the environment: %+v", n)
	}
}
