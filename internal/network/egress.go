package network

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
)

// The egress proxy's side of the network: the proxy (internal/egress) runs
// in the daemon; the network redirects the web traffic of sandboxes with
// rules to it (nft.go's proxy chain) and answers its questions here.

// EgressTarget is what the proxy needs to know about a redirected
// connection: whose it is, whether the sandbox's policy lets it reach its
// original destination, and the sandbox's rules.
type EgressTarget struct {
	SandboxID string
	// Allowed: the policy in force allows the original destination (a
	// redirected connection skips the forward chain, so the proxy enforces
	// the policy itself).
	Allowed bool
	pol     *compiled
}

// Rules returns the rules for host (the first matching domain's) and
// whether any domain matched.
func (t EgressTarget) Rules(host string) ([]Rule, bool) {
	if t.pol == nil {
		return nil, false
	}
	return t.pol.rulesFor(host)
}

// EgressTarget describes a connection from src (a sandbox's address) to its
// original destination dst; false when no sandbox has src.
func (m *Manager) EgressTarget(src, dst netip.Addr) (EgressTarget, bool) {
	m.reg.mu.RLock()
	defer m.reg.mu.RUnlock()
	sb := m.reg.byAddr[src]
	if sb == nil {
		return EgressTarget{}, false
	}
	return EgressTarget{SandboxID: sb.id, Allowed: m.reg.allows(sb, dst, time.Now()), pol: sb.pol}, true
}

// ListenProxy listens on the gateway's proxy port in the sandboxes' host
// namespace, where the redirect sends their connections.
func (m *Manager) ListenProxy() (net.Listener, error) {
	if m.opts.ProxyPort == 0 {
		return nil, fmt.Errorf("network: no egress proxy port configured: %w", errdefs.ErrUnavailable)
	}
	addr := netip.AddrPortFrom(m.host.gateway, m.opts.ProxyPort).String()
	var ln net.Listener
	err := m.host.inHostNS(func() (err error) {
		ln, err = net.Listen("tcp4", addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("egress proxy: listen on %s: %w", addr, err)
	}
	return ln, nil
}

// DialUpstream opens a TCP connection to addr from the sandboxes' host
// namespace (the proxy's own connection out).
func (m *Manager) DialUpstream(ctx context.Context, addr netip.AddrPort) (net.Conn, error) {
	var c net.Conn
	err := m.host.inHostNS(func() (err error) {
		var d net.Dialer
		c, err = d.DialContext(ctx, "tcp4", addr.String())
		return err
	})
	return c, err
}
