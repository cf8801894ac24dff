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
func (c *Client) ConnectPort(ctx context.Context, id string, port int) (net.Conn, error) {
	if c.base == nil || c.base.Host == "" || (c.base.Scheme != "http" && c.base.Scheme != "https") {
		return nil, fmt.Errorf("invalid warren URL %q: want something like http://127.0.0.1:3000", c.baseString())
	}
	host := c.base.Host
	if c.base.Port() == "" {
		host = net.JoinHostPort(c.base.Hostname(), map[string]string{"http": "80", "https": "443"}[c.base.Scheme])
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return nil, fmt.Errorf("cannot reach warren at %s (is `warren serve` running?): %w", c.baseString(), err)
	}
	if c.base.Scheme == "https" {
		tc := tls.Client(conn, &tls.Config{ServerName: c.base.Hostname(), NextProtos: []string{"http/1.1"}})
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, fmt.Errorf("TLS handshake with %s: %w", c.baseString(), err)
		}
		conn = tc
	}
	// A cancelled ctx must not leave us blocked in the handshake below.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	nc, err := c.upgradePort(conn, id, port)
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

func (c *Client) upgradePort(conn net.Conn, id string, port int) (net.Conn, error) {
	path := c.base.Path + "/sandboxes/" + url.PathEscape(id) + "/ports/" + strconv.Itoa(port) + "/connect"
	req, err := http.NewRequest(http.MethodGet, c.base.Scheme+"://"+c.base.Host+path, nil)
	if err != nil {
		return nil, fmt.Errorf("build port request: %w", err)
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", portUpgrade)
	if c.apiKey != "" {
		req.Header.Set("X-API-Key", c.apiKey)
	}
	if err := req.Write(conn); err != nil {
		return nil, fmt.Errorf("send port request to %s: %w", c.baseString(), err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return nil, fmt.Errorf("read the answer to the port request from %s: %w", c.baseString(), err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer resp.Body.Close()
		if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
			return nil, fmt.Errorf("warren at %s answered %s instead of upgrading: is it too old for port forwarding?", c.baseString(), resp.Status)
		}
		return nil, decodeError(resp)
	}
	if !strings.EqualFold(resp.Header.Get("Upgrade"), portUpgrade) {
		return nil, fmt.Errorf("warren at %s upgraded to %q, want %q", c.baseString(), resp.Header.Get("Upgrade"), portUpgrade)
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
