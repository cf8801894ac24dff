package gateway

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/kube/fleet"
)

// Config is `warren gateway`'s configuration: flags, each with an env var.
type Config struct {
	// Listen is the gateway's API address (WARREN_GATEWAY_LISTEN).
	Listen string
	// Kubeconfig is a kubeconfig file; empty means the pod's service
	// account (KUBECONFIG).
	Kubeconfig string
	// Namespace holds the Sandbox objects, Leases and API key Secrets
	// (WARREN_KUBE_NAMESPACE).
	Namespace string
	// Domain is the sandbox domain: Host <port>-<id>.<domain> reaches that
	// port of that sandbox (WARREN_GATEWAY_DOMAIN, else WARREN_DOMAIN).
	Domain string
	// PlacementSample is K of placement's best-of-K
	// (WARREN_GATEWAY_PLACEMENT_SAMPLE).
	PlacementSample int
	// GatewayID names this replica in logs, /health and leases
	// (WARREN_GATEWAY_ID; default <hostname>-<pid>).
	GatewayID string
	// Controllers runs the fleet's controller loops (placing Sandbox
	// objects, marking lost nodes' sandboxes Lost) under leader election:
	// one replica acts at a time (WARREN_GATEWAY_CONTROLLERS; default true).
	Controllers bool
	// Replicate keeps a copy of every paused or hibernated sandbox on a
	// second node, so that it can be restored there if its node is lost
	// (WARREN_GATEWAY_REPLICATE; default true; acts only with Controllers).
	Replicate bool
	// DrainOnCordon makes a cordon of a warren node's Kubernetes Node
	// (kubectl cordon, kubectl drain) move its sandboxes off, unless the
	// Node's warren.dev/drain annotation says "false"; without it only a
	// Node annotated warren.dev/drain=true is drained
	// (WARREN_GATEWAY_DRAIN_ON_CORDON; default false; acts only with
	// Controllers).
	DrainOnCordon bool

	// envErr is a malformed environment variable, reported by Validate.
	envErr error
}

// DefaultConfig is the configuration before flags: defaults overridden by
// the environment.
func DefaultConfig() Config {
	c := Config{
		Listen:          "127.0.0.1:3000",
		Kubeconfig:      os.Getenv("KUBECONFIG"),
		Namespace:       fleet.DefaultNamespace,
		PlacementSample: 3,
		Controllers:     true,
		Replicate:       true,
	}
	c.boolEnv("WARREN_GATEWAY_CONTROLLERS", &c.Controllers)
	c.boolEnv("WARREN_GATEWAY_REPLICATE", &c.Replicate)
	c.boolEnv("WARREN_GATEWAY_DRAIN_ON_CORDON", &c.DrainOnCordon)
	if v := os.Getenv("WARREN_GATEWAY_LISTEN"); v != "" {
		c.Listen = v
	}
	if v := os.Getenv("WARREN_KUBE_NAMESPACE"); v != "" {
		c.Namespace = v
	}
	c.Domain = os.Getenv("WARREN_DOMAIN")
	if v := os.Getenv("WARREN_GATEWAY_DOMAIN"); v != "" {
		c.Domain = v
	}
	if v := os.Getenv("WARREN_GATEWAY_PLACEMENT_SAMPLE"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			c.envErr = fmt.Errorf("WARREN_GATEWAY_PLACEMENT_SAMPLE=%q is not a number of nodes: %w", v, errdefs.ErrInvalid)
		}
		c.PlacementSample = n
	}
	if v := os.Getenv("WARREN_GATEWAY_ID"); v != "" {
		c.GatewayID = v
	}
	return c
}

// boolEnv sets *b from the environment variable name, if it is set.
func (c *Config) boolEnv(name string, b *bool) {
	v := os.Getenv(name)
	if v == "" {
		return
	}
	parsed, err := strconv.ParseBool(v)
	if err != nil {
		c.envErr = fmt.Errorf("%s=%q is not true or false: %w", name, v, errdefs.ErrInvalid)
		return
	}
	*b = parsed
}

func defaultGatewayID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "gateway"
	}
	return host + "-" + strconv.Itoa(os.Getpid())
}

// Validate says what is wrong with c, in the flags' words.
func (c Config) Validate() error {
	if c.envErr != nil {
		return c.envErr
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return fmt.Errorf("--listen %q is not host:port: %w", c.Listen, errdefs.ErrInvalid)
	}
	if c.Namespace == "" {
		return fmt.Errorf("--kube-namespace is empty: name the namespace of warren's objects (default %s): %w", fleet.DefaultNamespace, errdefs.ErrInvalid)
	}
	if c.PlacementSample < 1 {
		return fmt.Errorf("--placement-sample must be at least 1 (the nodes placement compares per create): %w", errdefs.ErrInvalid)
	}
	if strings.ContainsAny(c.Domain, "/: ") {
		return fmt.Errorf("--domain %q must be a bare DNS name (sandbox ports are <port>-<id>.<domain>): %w", c.Domain, errdefs.ErrInvalid)
	}
	if strings.ContainsAny(c.GatewayID, " \t\n") {
		return fmt.Errorf("--gateway-id %q must be one word: %w", c.GatewayID, errdefs.ErrInvalid)
	}
	return nil
}
