package gateway

import (
	"strings"
	"testing"
)

func TestConfigFromEnvAndValidate(t *testing.T) {
	t.Setenv("WARREN_GATEWAY_LISTEN", "127.0.0.1:3999")
	t.Setenv("WARREN_KUBE_NAMESPACE", "fleet")
	t.Setenv("WARREN_DOMAIN", "node.example")
	t.Setenv("WARREN_GATEWAY_DOMAIN", "sb.example")
	t.Setenv("WARREN_GATEWAY_PLACEMENT_SAMPLE", "5")
	t.Setenv("WARREN_GATEWAY_ID", "gw-1")
	c := DefaultConfig()
	if c.Listen != "127.0.0.1:3999" || c.Namespace != "fleet" || c.Domain != "sb.example" || c.PlacementSample != 5 || c.GatewayID != "gw-1" {
		t.Fatalf("config from the environment: %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		edit func(*Config)
		flag string
	}{
		{func(c *Config) { c.Listen = "3000" }, "--listen"},
		{func(c *Config) { c.Namespace = "" }, "--kube-namespace"},
		{func(c *Config) { c.PlacementSample = 0 }, "--placement-sample"},
		{func(c *Config) { c.Domain = "http://sb.example" }, "--domain"},
		{func(c *Config) { c.GatewayID = "gw 1" }, "--gateway-id"},
	} {
		bad := DefaultConfig()
		c.edit(&bad)
		if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), c.flag) || statusOf(err) != 400 {
			t.Errorf("%s: %v", c.flag, err)
		}
	}
	t.Setenv("WARREN_GATEWAY_PLACEMENT_SAMPLE", "three")
	if err := DefaultConfig().Validate(); err == nil {
		t.Error("a malformed WARREN_GATEWAY_PLACEMENT_SAMPLE was accepted")
	}
}

// TestConfigDrainOnCordon: off by default (a cordon alone moves nothing),
// on from the environment, and a malformed value is named.
func TestConfigDrainOnCordon(t *testing.T) {
	if DefaultConfig().DrainOnCordon {
		t.Error("--drain-on-cordon is on by default")
	}
	t.Setenv("WARREN_GATEWAY_DRAIN_ON_CORDON", "true")
	if !DefaultConfig().DrainOnCordon {
		t.Error("WARREN_GATEWAY_DRAIN_ON_CORDON=true did not turn it on")
	}
	t.Setenv("WARREN_GATEWAY_DRAIN_ON_CORDON", "sometimes")
	if err := DefaultConfig().Validate(); err == nil || !strings.Contains(err.Error(), "WARREN_GATEWAY_DRAIN_ON_CORDON") {
		t.Errorf("a malformed WARREN_GATEWAY_DRAIN_ON_CORDON: %v", err)
	}
}
