package daemon

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/tlscerts"
)

// tlsListener is the TLS listener --tls-listen asks for (nil without one)
// and the certificate of warren's own CA when it mints (--tls-ca auto).
func (d *Daemon) tlsListener() (net.Listener, []byte, error) {
	t := d.cfg.TLS
	if t.Listen == "" {
		return nil, nil, nil
	}
	// HTTP/1.1 only: port routes carry WebSocket and raw upgrades, which
	// need a connection of their own (HTTP/2 has no Upgrade).
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
	var caPEM []byte
	if t.CA == config.TLSCAAuto {
		ca, err := tlscerts.Open(tlscerts.Options{
			Dir: d.cfg.TLSDir(), Domain: d.cfg.Domain, IPs: listenIPs(t.Listen),
			Log: d.log.With("component", "tls"),
		})
		if err != nil {
			return nil, nil, fmt.Errorf("warren's CA (--tls-ca auto): %w", err)
		}
		cfg.GetCertificate = ca.GetCertificate
		caPEM = ca.CertPEM()
	} else {
		pair, err := tls.LoadX509KeyPair(t.Cert, t.Key)
		if err != nil {
			return nil, nil, fmt.Errorf("--tls-cert %s / --tls-key %s: %w", t.Cert, t.Key, err)
		}
		if err := pair.Leaf.VerifyHostname("1-x." + d.cfg.Domain); err != nil {
			d.log.Warn("the TLS certificate does not cover the port URLs <port>-<id>."+d.cfg.Domain+": give a wildcard for *."+d.cfg.Domain, "cert", t.Cert, "err", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	ln, err := net.Listen("tcp", t.Listen)
	if err != nil {
		return nil, nil, fmt.Errorf("listen on %s (--tls-listen): %w", t.Listen, err)
	}
	return tls.NewListener(ln, cfg), caPEM, nil
}

// listenIPs are the addresses a client without SNI may have dialled: the
// listener's own, and loopback.
func listenIPs(addr string) []net.IP {
	ips := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	host, _, _ := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() && !ip.IsLoopback() {
		ips = append(ips, ip)
	}
	return ips
}

// newHTTPServer serves api on one listener. A client gets 10 s to send its
// headers (slow ones are cut), and a kept-alive connection with no request
// for 2 minutes is closed, so that idle connections cannot pile up to the
// file limit.
func newHTTPServer(api http.Handler) *http.Server {
	return &http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
}

// tlsServer serves api on the TLS listener. Failed handshakes (scanners,
// clients that do not trust the CA) are debug noise; a refused name is
// logged by the CA.
func (d *Daemon) tlsServer(api http.Handler, ln net.Listener, ownCA bool) listening {
	srv := newHTTPServer(api)
	srv.ErrorLog = slog.NewLogLogger(d.log.Handler(), slog.LevelDebug)
	d.log.Info("warren is serving TLS", "addr", ln.Addr().String(), "own CA", ownCA)
	return listening{srv, ln}
}
