// Package egress is the daemon's egress proxy: the web traffic (TCP 80 and
// 443) of sandboxes whose network policy has rules is redirected to it by
// the network's nftables table. It applies the rules' header transforms
// and puts secrets' values in place of their placeholders, only for the
// hosts each secret allows, so that the sandbox never holds a value.
//
// HTTPS to a host with rules is terminated with a leaf from the daemon's CA
// (which every networked sandbox trusts) and sent on over a new TLS
// connection verified against the host's trust store; HTTPS to any other
// host is spliced byte for byte, never decrypted. Plain HTTP is rewritten
// in place, but a secret is never sent over it. See docs/security.md.
package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/network"
	"github.com/warrenhq/warren/internal/secrets"
)

// Network is what the proxy needs of the sandboxes' network.
type Network interface {
	EgressTarget(src, dst netip.Addr) (network.EgressTarget, bool)
	DialUpstream(ctx context.Context, addr netip.AddrPort) (net.Conn, error)
}

// Secrets resolves a sandbox's team's secret by name.
type Secrets interface {
	Resolve(ctx context.Context, sandboxID, name string) (secrets.Resolved, error)
}

// Event is an audit record of a secret's use or refusal. It never holds a
// value.
type Event struct {
	SandboxID string
	Kind      string // EventSecretUsed or EventSecretRefused
	Secret    string
	Version   int
	Host      string
	Reason    string
}

const (
	EventSecretUsed    = "secret-used"
	EventSecretRefused = "secret-refused"
)

// Proxy serves the redirected connections.
type Proxy struct {
	Net     Network
	Secrets Secrets
	CA      *CA
	// Roots verify upstream servers (nil: the host's trust store).
	Roots *x509.CertPool
	// Audit receives every secret use and refusal; it must not block long.
	Audit func(Event)
	Log   *slog.Logger

	mu         sync.Mutex
	transports map[transportKey]*http.Transport
	conns      sync.WaitGroup
}

type transportKey struct {
	dst    netip.AddrPort
	secure bool
	socks  network.EgressProxy // zero: none
}

// helloTimeout bounds the wait for a client's first bytes.
const helloTimeout = 10 * time.Second

// Serve accepts connections until ln is closed.
func (p *Proxy) Serve(ln net.Listener) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		p.conns.Add(1)
		go func() {
			defer p.conns.Done()
			p.handle(c)
		}()
	}
}

// Close drops the idle upstream connections. Open client connections end
// with their clients.
func (p *Proxy) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, t := range p.transports {
		t.CloseIdleConnections()
	}
}

func (p *Proxy) handle(c net.Conn) {
	defer c.Close()
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return
	}
	dst, err := originalDst(tc)
	if err != nil {
		p.Log.Debug("egress proxy: no original destination", "err", err)
		return
	}
	src := netip.MustParseAddrPort(c.RemoteAddr().String())
	local := netip.MustParseAddrPort(c.LocalAddr().String())
	t, ok := p.Net.EgressTarget(src.Addr().Unmap(), dst.Addr())
	// A connection made straight to the proxy's port (not redirected) has
	// the proxy itself as its original destination.
	if !ok || dst == local || !t.Allowed {
		_ = tc.SetLinger(0) // a reset, as the filter's reject gives
		return
	}
	ctx := context.Background()
	switch dst.Port() {
	case 443:
		p.https(ctx, tc, t, dst)
	case 80:
		p.serveHTTP(ctx, c, bufio.NewReader(c), t, dst, "", false)
	default:
		// Only a sandbox with a SOCKS5 upstream has its other ports sent
		// here: tunnel them.
		p.splice(ctx, tc, t, nil, dst)
	}
}

// dial opens a connection to dst for sandbox target t: straight from the
// host, or through its SOCKS5 upstream, with no fallback when that fails
// (egress fails closed).
func (p *Proxy) dial(ctx context.Context, t network.EgressTarget, dst netip.AddrPort) (net.Conn, error) {
	ep := t.EgressProxy()
	if ep == nil {
		return p.Net.DialUpstream(ctx, dst)
	}
	server, err := p.resolveSOCKS(ctx, ep.Address)
	if err != nil {
		return nil, err
	}
	c, err := p.Net.DialUpstream(ctx, server)
	if err != nil {
		return nil, fmt.Errorf("egress proxy %s unreachable: %w", ep.Address, err)
	}
	if err := socksConnect(c, ep.Username, ep.Password, dst); err != nil {
		c.Close()
		// The error names the SOCKS server, never its password.
		return nil, fmt.Errorf("through the egress proxy %s: %w", ep.Address, err)
	}
	return c, nil
}

// resolveSOCKS turns the SOCKS5 server's host:port into an address (a name
// through the daemon's own resolver).
func (p *Proxy) resolveSOCKS(ctx context.Context, addr string) (netip.AddrPort, error) {
	if ap, err := netip.ParseAddrPort(addr); err == nil {
		return ap, nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return netip.AddrPort{}, err
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return netip.AddrPort{}, err
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip4", host)
	if err != nil || len(ips) == 0 {
		return netip.AddrPort{}, fmt.Errorf("egress proxy: resolve %s: %w", host, err)
	}
	return netip.AddrPortFrom(ips[0], uint16(n)), nil
}

// https reads the client's SNI, then splices or intercepts.
func (p *Proxy) https(ctx context.Context, c *net.TCPConn, t network.EgressTarget, dst netip.AddrPort) {
	_ = c.SetReadDeadline(time.Now().Add(helloTimeout))
	sni, hello := peekSNI(c)
	_ = c.SetReadDeadline(time.Time{})
	host := strings.ToLower(strings.TrimSuffix(sni, "."))
	if _, has := t.Rules(host); host == "" || !has {
		p.splice(ctx, c, t, hello, dst)
		return
	}
	srv := tls.Server(&prefixConn{Conn: c, r: io.MultiReader(bytes.NewReader(hello), c)}, &tls.Config{
		GetCertificate: func(h *tls.ClientHelloInfo) (*tls.Certificate, error) { return p.CA.Leaf(host, h) },
		NextProtos:     []string{"http/1.1"},
		MinVersion:     tls.VersionTLS12,
	})
	hctx, cancel := context.WithTimeout(ctx, helloTimeout)
	defer cancel()
	if err := srv.HandshakeContext(hctx); err != nil {
		p.Log.Debug("egress proxy: client handshake", "sandbox", t.SandboxID, "host", host, "err", err)
		return
	}
	p.serveHTTP(ctx, srv, bufio.NewReader(srv), t, dst, host, true)
}

// splice copies bytes both ways, untouched, to the original destination.
func (p *Proxy) splice(ctx context.Context, c *net.TCPConn, t network.EgressTarget, first []byte, dst netip.AddrPort) {
	up, err := p.dial(ctx, t, dst)
	if err != nil {
		_ = c.SetLinger(0)
		return
	}
	defer up.Close()
	if _, err := up.Write(first); err != nil {
		return
	}
	pipe(c, up)
}

// pipe copies both ways until both directions end.
func pipe(a, b net.Conn) {
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(b, a)
		closeWrite(b)
		close(done)
	}()
	_, _ = io.Copy(a, b)
	closeWrite(a)
	<-done
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}

// serveHTTP proxies the requests on one client connection. sni is the
// TLS server name (secure) or "" (plain HTTP: the Host header names the
// host).
func (p *Proxy) serveHTTP(ctx context.Context, c net.Conn, br *bufio.Reader, t network.EgressTarget, dst netip.AddrPort, sni string, secure bool) {
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		host := hostOnly(req.Host)
		if secure && host != sni {
			// The certificate checked upstream is sni's; a request for
			// another virtual host could carry a secret past allowedHosts.
			writeRefusal(c, http.StatusMisdirectedRequest, fmt.Sprintf("warren egress proxy: request for %q on a TLS connection to %q", host, sni))
			return
		}
		rules, _ := t.Rules(host)
		for _, r := range rules {
			if r.Transform == nil {
				continue
			}
			for name, v := range r.Transform.Headers {
				req.Header.Set(name, v)
			}
		}
		if msg := p.fill(ctx, t.SandboxID, req.Header, host, secure); msg != "" {
			writeRefusal(c, http.StatusForbidden, msg)
			return
		}
		req.RequestURI = ""
		req.URL.Host = req.Host
		req.URL.Scheme = "http"
		if secure {
			req.URL.Scheme = "https"
		}
		resp, err := p.transport(t, dst, secure).RoundTrip(req.WithContext(ctx))
		if err != nil {
			p.Log.Debug("egress proxy: upstream", "sandbox", t.SandboxID, "host", host, "err", err)
			writeRefusal(c, http.StatusBadGateway, "warren egress proxy: upstream "+host+": "+upstreamError(err))
			return
		}
		if resp.StatusCode == http.StatusSwitchingProtocols {
			p.upgraded(c, br, resp)
			return
		}
		// The sandbox's side is HTTP/1.1 whatever the upstream spoke.
		resp.Proto, resp.ProtoMajor, resp.ProtoMinor = "HTTP/1.1", 1, 1
		err = resp.Write(c)
		resp.Body.Close()
		if err != nil || req.Close || resp.Close {
			return
		}
	}
}

// upgraded answers a 101 and then copies bytes both ways (websockets).
func (p *Proxy) upgraded(c net.Conn, br *bufio.Reader, resp *http.Response) {
	up, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		return
	}
	defer up.Close()
	var head bytes.Buffer
	fmt.Fprintf(&head, "HTTP/1.1 %s\r\n", resp.Status)
	_ = resp.Header.Write(&head)
	head.WriteString("\r\n")
	if _, err := c.Write(head.Bytes()); err != nil {
		return
	}
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(up, br)
		close(done)
	}()
	_, _ = io.Copy(c, up)
	_ = c.Close()
	<-done
}

// fill resolves the placeholders in h's values for a request to host, in
// place. It returns why the request is refused, or "".
func (p *Proxy) fill(ctx context.Context, sandbox string, h http.Header, host string, secure bool) string {
	resolved := map[string]secrets.Resolved{}
	for key, vals := range h {
		for i, v := range vals {
			names := secrets.Names(v)
			if len(names) == 0 {
				continue
			}
			for _, n := range names {
				if !secure {
					p.audit(Event{SandboxID: sandbox, Kind: EventSecretRefused, Secret: n, Host: host, Reason: "plain HTTP"})
					return fmt.Sprintf("warren egress proxy: secret %q is never sent over plain HTTP; use https://%s", n, host)
				}
				if _, ok := resolved[n]; ok {
					continue
				}
				r, err := p.Secrets.Resolve(ctx, sandbox, n)
				if err != nil {
					reason := "unavailable"
					if errdefs.IsNotFound(err) {
						reason = "no such secret"
					} else {
						p.Log.Error("egress proxy: resolve a secret", "sandbox", sandbox, "secret", n, "err", err)
					}
					p.audit(Event{SandboxID: sandbox, Kind: EventSecretRefused, Secret: n, Host: host, Reason: reason})
					return fmt.Sprintf("warren egress proxy: secret %q: %s", n, reason)
				}
				if !secrets.HostAllowed(r.AllowedHosts, host) {
					p.audit(Event{SandboxID: sandbox, Kind: EventSecretRefused, Secret: n, Version: r.Version, Host: host, Reason: "host not in allowedHosts"})
					return fmt.Sprintf("warren egress proxy: secret %q may not be sent to %s (not in its allowedHosts)", n, host)
				}
				resolved[n] = r
			}
			out := secrets.Expand(v, func(n string) string { return resolved[n].Value.Reveal() })
			if !httpguts.ValidHeaderFieldValue(out) {
				p.audit(Event{SandboxID: sandbox, Kind: EventSecretRefused, Secret: names[0], Host: host, Reason: "value not valid in a header"})
				return fmt.Sprintf("warren egress proxy: header %s: a secret's value holds characters a header may not", key)
			}
			vals[i] = out
		}
	}
	for _, r := range resolved {
		p.audit(Event{SandboxID: sandbox, Kind: EventSecretUsed, Secret: r.Name, Version: r.Version, Host: host})
	}
	return ""
}

func (p *Proxy) audit(e Event) {
	p.Log.Info("egress proxy: "+e.Kind, "sandbox", e.SandboxID, "secret", e.Secret, "version", e.Version, "host", e.Host, "reason", e.Reason)
	if p.Audit != nil {
		p.Audit(e)
	}
}

// transport returns the pooled upstream connections to dst: requests reuse
// warm connections, and every connection goes to the destination the
// sandbox's policy allowed, whatever the request names.
func (p *Proxy) transport(target network.EgressTarget, dst netip.AddrPort, secure bool) *http.Transport {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := transportKey{dst: dst, secure: secure}
	if ep := target.EgressProxy(); ep != nil {
		k.socks = *ep
	}
	if t, ok := p.transports[k]; ok {
		return t
	}
	if p.transports == nil {
		p.transports = map[transportKey]*http.Transport{}
	}
	t := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return p.dial(ctx, target, dst)
		},
		TLSClientConfig:       &tls.Config{RootCAs: p.Roots, MinVersion: tls.VersionTLS12},
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 5 * time.Minute,
		DisableCompression:    true,
		// HTTP/2 toward upstreams that offer it (the sandbox's side stays
		// HTTP/1.1); websocket upgrades go over HTTP/1.1.
		ForceAttemptHTTP2: true,
	}
	p.transports[k] = t
	return t
}

func upstreamError(err error) string {
	var ce *tls.CertificateVerificationError
	if errors.As(err, &ce) {
		return "its certificate is not trusted"
	}
	return "unreachable"
}

func writeRefusal(c net.Conn, status int, msg string) {
	body := msg + "\n"
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		status, http.StatusText(status), len(body), body)
}

func hostOnly(hostport string) string {
	h := hostport
	if hh, _, err := net.SplitHostPort(hostport); err == nil {
		h = hh
	}
	return strings.ToLower(strings.TrimSuffix(h, "."))
}

// originalDst is where the client meant to connect before the redirect.
func originalDst(c *net.TCPConn) (netip.AddrPort, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, err
	}
	var mreq *unix.IPv6Mreq
	var gerr error
	if err := raw.Control(func(fd uintptr) {
		// SO_ORIGINAL_DST answers a sockaddr_in, which fits the first
		// bytes of an ipv6_mreq.
		mreq, gerr = unix.GetsockoptIPv6Mreq(int(fd), unix.SOL_IP, unix.SO_ORIGINAL_DST)
	}); err != nil {
		return netip.AddrPort{}, err
	}
	if gerr != nil {
		return netip.AddrPort{}, gerr
	}
	a := mreq.Multiaddr
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte(a[4:8])), binary.BigEndian.Uint16(a[2:4])), nil
}

// peekSNI reads the client's ClientHello and returns its server name and
// every byte read, to replay to whoever handles the connection next.
func peekSNI(c net.Conn) (string, []byte) {
	rc := &recordConn{Conn: c}
	var sni string
	stop := errors.New("stop")
	_ = tls.Server(rc, &tls.Config{GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		sni = h.ServerName
		return nil, stop
	}}).Handshake()
	return sni, rc.buf.Bytes()
}

// recordConn keeps what it reads and writes nothing (the alert the aborted
// handshake sends must not reach the client).
type recordConn struct {
	net.Conn
	buf bytes.Buffer
}

func (r *recordConn) Read(b []byte) (int, error) {
	n, err := r.Conn.Read(b)
	r.buf.Write(b[:n])
	return n, err
}

func (r *recordConn) Write(b []byte) (int, error) { return len(b), nil }

// prefixConn reads from r (the replayed bytes, then the connection).
type prefixConn struct {
	net.Conn
	r io.Reader
}

func (p *prefixConn) Read(b []byte) (int, error) { return p.r.Read(b) }
