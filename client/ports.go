package client

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// portUpgrade is the Upgrade token of the raw-TCP port endpoint.
const portUpgrade = "warren-tcp"

// ConnectPort opens a TCP connection to port inside sandbox id, through the
// daemon (GET /sandboxes/{id}/ports/{port}/connect, upgraded to raw bytes)
// and the sandbox's agent, so it works with the sandbox's network off. The
// returned conn supports CloseWrite (half-close) through the interface
// { CloseWrite() error }. It dials the daemon directly (http or https), not
// through the Client's http.Client: an upgraded connection is not a request.
func (s *NetworkService) ConnectPort(ctx context.Context, id string, port int) (net.Conn, error) {
	conn, err := s.t.dial(ctx)
	if err != nil {
		return nil, err
	}
	// A cancelled ctx must not leave us blocked in the handshake below.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	nc, err := s.t.upgradePort(conn, id, port)
	if !stop() && err == nil {
		nc.Close()
		return nil, ctx.Err()
	}
	if err != nil {
		conn.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	return nc, nil
}

// dial opens a connection to the daemon (TLS for https) for a request
// that upgrades it to another protocol.
func (t *transport) dial(ctx context.Context) (net.Conn, error) {
	if t.base == nil || t.base.Host == "" || (t.base.Scheme != "http" && t.base.Scheme != "https") {
		return nil, fmt.Errorf("invalid warren URL %q: want something like http://127.0.0.1:3000", t.baseString())
	}
	host := t.base.Host
	if t.base.Port() == "" {
		host = net.JoinHostPort(t.base.Hostname(), map[string]string{"http": "80", "https": "443"}[t.base.Scheme])
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return nil, fmt.Errorf("cannot reach warren at %s (is `warren serve` running?): %w", t.baseString(), err)
	}
	if t.base.Scheme == "https" {
		tc := tls.Client(conn, &tls.Config{ServerName: t.base.Hostname(), NextProtos: []string{"http/1.1"}})
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, fmt.Errorf("TLS handshake with %s: %w", t.baseString(), err)
		}
		conn = tc
	}
	return conn, nil
}

func (t *transport) upgradePort(conn net.Conn, id string, port int) (net.Conn, error) {
	path := t.base.Path + "/sandboxes/" + url.PathEscape(id) + "/ports/" + strconv.Itoa(port) + "/connect"
	req, err := http.NewRequest(http.MethodGet, t.base.Scheme+"://"+t.base.Host+path, nil)
	if err != nil {
		return nil, fmt.Errorf("build port request: %w", err)
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", portUpgrade)
	if t.apiKey != "" {
		req.Header.Set("X-API-Key", t.apiKey)
	}
	if err := req.Write(conn); err != nil {
		return nil, fmt.Errorf("send port request to %s: %w", t.baseString(), err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return nil, fmt.Errorf("read the answer to the port request from %s: %w", t.baseString(), err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer resp.Body.Close()
		if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
			return nil, fmt.Errorf("warren at %s answered %s instead of upgrading: is it too old for port forwarding?", t.baseString(), resp.Status)
		}
		return nil, decodeError(resp)
	}
	if !strings.EqualFold(resp.Header.Get("Upgrade"), portUpgrade) {
		return nil, fmt.Errorf("warren at %s upgraded to %q, want %q", t.baseString(), resp.Header.Get("Upgrade"), portUpgrade)
	}
	return &upgradedConn{Conn: conn, r: br}, nil
}

// upgradedConn reads through the buffer that held the 101 answer, so bytes
// the server sent right behind it are not lost.
type upgradedConn struct {
	net.Conn
	r *bufio.Reader
}

func (u *upgradedConn) Read(b []byte) (int, error) { return u.r.Read(b) }

// CloseWrite shuts the sending side: the server inside reads EOF.
func (u *upgradedConn) CloseWrite() error {
	if cw, ok := u.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return fmt.Errorf("half-close is not supported on this connection")
}
