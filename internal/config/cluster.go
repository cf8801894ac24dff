package config

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
)

// ClusterKubernetes is the one cluster mode: node mode on Kubernetes.
const ClusterKubernetes = "kubernetes"

// ClusterConfig is node mode's part of the configuration (`warren serve
// --cluster kubernetes`); Cluster "" is a single host, and the rest is then
// unused.
type ClusterConfig struct {
	Cluster string
	// Kubeconfig is a kubeconfig file; "" = the pod's service account.
	Kubeconfig string
	// NodeName names the node's WarrenNode and Lease (default: the host
	// name, lower-cased).
	NodeName string
	// AdvertiseURL is where the gateway reaches this node's API (default:
	// http://<the address the API listens on>).
	AdvertiseURL string
	// Namespace holds the node's Sandbox objects, Lease and the fleet's key
	// Secrets.
	Namespace     string
	LeaseDuration time.Duration

	// envErr is a malformed WARREN_LEASE_DURATION, reported when node mode
	// is validated.
	envErr error
}

func defaultCluster() ClusterConfig {
	c := ClusterConfig{
		Cluster:       os.Getenv("WARREN_CLUSTER"),
		Kubeconfig:    os.Getenv("KUBECONFIG"),
		NodeName:      os.Getenv("WARREN_NODE_NAME"),
		AdvertiseURL:  os.Getenv("WARREN_ADVERTISE_URL"),
		Namespace:     envOr("WARREN_KUBE_NAMESPACE", "warren"),
		LeaseDuration: 15 * time.Second,
	}
	if v := os.Getenv("WARREN_LEASE_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			c.envErr = fmt.Errorf("WARREN_LEASE_DURATION=%q is not a duration such as 15s: %w", v, errdefs.ErrInvalid)
		}
		c.LeaseDuration = d
	}
	return c
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// isDNSLabel: s is a Kubernetes name that is also a valid label value
// (the node's name labels its Sandbox objects): 1–63 of [a-z0-9.-],
// beginning and ending with a letter or digit. Not a regexp: `{0,61}`
// compiles into 61 copies of its class at every start of the binary,
// sandbox inits included.
func isDNSLabel(s string) bool {
	if len(s) == 0 || len(s) > 63 {
		return false
	}
	alnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }
	for i := 0; i < len(s); i++ {
		if c := s[i]; !alnum(c) && c != '.' && c != '-' {
			return false
		}
	}
	return alnum(s[0]) && alnum(s[len(s)-1])
}

// validateCluster checks node mode's settings and fills its defaults.
func (c *Config) validateCluster() error {
	k := &c.Cluster
	switch k.Cluster {
	case "":
		return nil
	case ClusterKubernetes:
		if k.envErr != nil {
			return k.envErr
		}
	default:
		return fmt.Errorf("--cluster %q: want kubernetes, or nothing for a single host: %w", k.Cluster, errdefs.ErrInvalid)
	}
	if k.NodeName == "" {
		host, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("--node-name is empty and the host name is unknown (%v): give --node-name: %w", err, errdefs.ErrInvalid)
		}
		k.NodeName = strings.ToLower(host)
	}
	if !isDNSLabel(k.NodeName) {
		return fmt.Errorf("--node-name %q: want at most 63 lowercase letters, digits, '-' or '.', starting and ending with a letter or digit: %w", k.NodeName, errdefs.ErrInvalid)
	}
	if !isDNSLabel(k.Namespace) || strings.Contains(k.Namespace, ".") {
		return fmt.Errorf("--kube-namespace %q: want a Kubernetes namespace name (lowercase letters, digits and '-'): %w", k.Namespace, errdefs.ErrInvalid)
	}
	if k.LeaseDuration < 3*time.Second {
		return fmt.Errorf("--lease-duration %s: want at least 3s (it is renewed every third of it): %w", k.LeaseDuration, errdefs.ErrInvalid)
	}
	if k.AdvertiseURL == "" {
		return nil // the daemon uses the address it listens on
	}
	u, err := url.Parse(k.AdvertiseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return fmt.Errorf("--advertise-url %q: want http(s)://HOST[:PORT]: %w", k.AdvertiseURL, errdefs.ErrInvalid)
	}
	k.AdvertiseURL = strings.TrimSuffix(k.AdvertiseURL, "/")
	return nil
}

// Advertise is the URL the gateway reaches the node's API at: the
// configured one, else http:// and the address the API listens on (addr).
// An unspecified address (0.0.0.0) says nothing to other hosts, so it is
// replaced by the host name.
func (k ClusterConfig) Advertise(addr string) string {
	if k.AdvertiseURL != "" {
		return k.AdvertiseURL
	}
	host, port, err := net.SplitHostPort(addr)
	if err == nil {
		if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
			if h, err := os.Hostname(); err == nil {
				addr = net.JoinHostPort(h, port)
			}
		}
	}
	return "http://" + addr
}
