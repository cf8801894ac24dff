package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/accesstoken"
	"github.com/warrenhq/warren/internal/agentconn"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/session"
)

// envdPort is E2B's envd port: requests for it are the sandbox-plane API,
// not traffic for a user's server.
const envdPort = 49983

// tcpUpgrade is the Upgrade token of GET /sandboxes/{id}/ports/{port}/connect.
const tcpUpgrade = "warren-tcp"

// portTarget is a server inside a sandbox that a request is for.
type portTarget struct {
	id   string
	port int
}

// validPort checks a port number from a request.
func validPort(port int) error {
	if port < 1 || port > 65535 {
		return fmt.Errorf("port %d is out of range: want 1..65535: %w", port, errdefs.ErrInvalid)
	}
	return nil
}

// portRecords remembers the two facts of a sandbox's record the port route
// checks, its team and whether its ports are public, so that a request to
// a port does not read the database. Both are written once with the record
// and sandbox ids are never reused, so an entry cannot go stale; a
// destroyed sandbox's entry is harmless (Sessions.Agent refuses it) and is
// dropped when a request finds the sandbox gone.
type portRecords struct {
	mu sync.Mutex
	m  map[string]portRecord
}

type portRecord struct {
	team   string
	public bool
	// maskHost is the Host the server inside sees ("" = the caller's).
	maskHost string
	// The sandbox's tokens, derived once rather than per request.
	traffic, envd string
}

// maxPortRecords bounds the cache; past it, it starts over.
const maxPortRecords = 4096

func (c *portRecords) get(id string) (portRecord, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	rec, ok := c.m[id]
	return rec, ok
}

func (c *portRecords) remember(id string, rec portRecord) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxPortRecords {
		c.m = make(map[string]portRecord)
	}
	c.m[id] = rec
}

func (c *portRecords) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, id)
}

// portRequest is a request on its way to a port inside a sandbox, carried in
// its context to the proxy's Rewrite, dialer and error handler.
type portRequest struct {
	id    string
	port  int
	agent *agentconn.Conn
	// credentials are the caller's Authorization values that hold warren
	// credentials: they are not forwarded (any other Authorization, the
	// app's own, is).
	credentials []string
	// host replaces the caller's Host ("": kept).
	host string
}

type portRequestKey struct{}

func portRequestOf(ctx context.Context) *portRequest {
	pr, _ := ctx.Value(portRequestKey{}).(*portRequest)
	return pr
}

// portRoutes serve servers inside sandboxes: the sandbox plane's ports
// other than envd's, and GET /sandboxes/{id}/ports/{port}/connect.
//
// HTTP (and upgraded WebSocket) traffic goes through one reverse proxy.
// Connections are tunnels through the agent, kept alive and reused per
// sandbox and port (the transport's pool key is "<id>:<port>"); a request
// reaches the proxy only after it was allowed to reach its port.
type portRoutes struct {
	plane  Plane
	tokens *accesstoken.Issuer
	authz  *authCache
	log    *slog.Logger

	proxyOnce sync.Once
	proxy     *httputil.ReverseProxy
	records   portRecords
}

func (s *portRoutes) reverseProxy() *httputil.ReverseProxy {
	s.proxyOnce.Do(func() {
		tr := &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				pr := portRequestOf(ctx)
				if pr == nil {
					return nil, errors.New("port proxy: request without a tunnel target")
				}
				// HTTP clients speak first: the request goes out behind
				// the dial instead of after the agent's answer, and a port
				// nobody listens on is the error of reading the response.
				tun, err := pr.agent.OpenPort(ctx, pr.port)
				if err != nil {
					return nil, err
				}
				// The transport keeps the connection for later requests
				// to the same sandbox and port; an idle one in its pool
				// moves no bytes and so marks nothing.
				return metered(tun, s.plane.ActivityMeter(pr.id)), nil
			},
			MaxIdleConnsPerHost: 16,
			IdleConnTimeout:     30 * time.Second,
			DisableCompression:  true,
		}
		s.proxy = &httputil.ReverseProxy{
			Rewrite: func(r *httputil.ProxyRequest) {
				pr := portRequestOf(r.In.Context())
				r.Out.URL.Scheme = "http"
				r.Out.URL.Host = net.JoinHostPort(pr.id, strconv.Itoa(pr.port))
				r.Out.Host = r.In.Host // servers that check Host see what the user typed
				if pr.host != "" {
					r.Out.Host = pr.host // unless the sandbox asked for another (maskRequestHost)
				}
				r.SetXForwarded()
				// The sandbox's code is not to see the caller's credentials.
				for _, h := range []string{"X-API-Key", "E2b-Sandbox-Id", "E2b-Sandbox-Port", "X-Access-Token", "E2b-Traffic-Access-Token"} {
					r.Out.Header.Del(h)
				}
				if len(pr.credentials) > 0 {
					r.Out.Header["Authorization"] = slices.DeleteFunc(slices.Clone(r.Out.Header["Authorization"]), func(v string) bool {
						return slices.Contains(pr.credentials, v)
					})
					if len(r.Out.Header["Authorization"]) == 0 {
						r.Out.Header.Del("Authorization")
					}
				}
			},
			Transport: tr,
			// 0 is the reverse proxy's own policy: a response of unknown
			// length (streamed, chunked) or server-sent events is flushed
			// as each write arrives, one of known length when complete, so
			// its headers and body leave in one write.
			FlushInterval: 0,
			ErrorHandler:  s.portProxyError,
		}
	})
	return s.proxy
}

// servePort serves a request routed to a port inside a sandbox: it checks
// that the caller may reach the port, then proxies it.
func (s *portRoutes) servePort(w http.ResponseWriter, r *http.Request, t portTarget) {
	if known, ok := s.records.get(t.id); ok && s.portAllowed(r, known) {
		s.proxyPort(w, r, t, known)
		return
	}
	// First request for this sandbox, or refused on what is remembered: the
	// record decides (it may be gone: then "not found", not "refused").
	rec, err := s.plane.Lookup(r.Context(), t.id)
	if err != nil {
		s.records.forget(t.id)
		sandboxGone(w, r, t.id, err)
		return
	}
	known := portRecord{
		team: rec.Team, public: rec.PublicPorts, maskHost: rec.MaskRequestHost,
		traffic: s.tokens.TrafficToken(rec.ID), envd: s.tokens.EnvdToken(rec.ID),
	}
	s.records.remember(rec.ID, known)
	if !s.portAllowed(r, known) {
		// E2B's 403 and words (its SDK and users' code match on them); the
		// envd token and a team key, which warren also takes, are in the docs.
		missing := r.Header.Get("E2b-Traffic-Access-Token") == ""
		writeJSON(w, http.StatusForbidden, client.TrafficTokenRefused(rec.ID, missing))
		return
	}
	s.proxyPort(w, r, t, known)
}

// portPlaceholder stands for the port in a sandbox's maskRequestHost, as
// in E2B's.
const portPlaceholder = "${PORT}"

// maskedHost is the Host a sandbox's maskRequestHost gives a request to
// port ("" without one).
func maskedHost(mask string, port int) string {
	if mask == "" {
		return ""
	}
	return strings.ReplaceAll(mask, portPlaceholder, strconv.Itoa(port))
}

// validMaskHost checks a create's maskRequestHost: a host, optionally with
// a port, where "${PORT}" may stand for the port; nothing that could split
// or smuggle a header.
func validMaskHost(mask string) error {
	if mask == "" {
		return nil
	}
	h := maskedHost(mask, 65535)
	ok := len(h) <= 255
	for _, c := range h {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("-._:[]", c)) {
			ok = false
		}
	}
	if !ok {
		return fmt.Errorf("network.maskRequestHost %q is not a host[:port] (letters, digits, -._:[] and %s for the port, at most 255 characters): %w", mask, portPlaceholder, errdefs.ErrInvalid)
	}
	return nil
}

// portAllowed checks a caller of a sandbox's port: anyone when its ports are
// public, else its traffic token, its envd token, or its team's API key.
func (s *portRoutes) portAllowed(r *http.Request, rec portRecord) bool {
	if rec.public {
		return true
	}
	if accesstoken.Equal(r.Header.Get("E2b-Traffic-Access-Token"), rec.traffic) {
		return true
	}
	if accesstoken.Equal(r.Header.Get("X-Access-Token"), rec.envd) {
		return true
	}
	return s.authz.keyTeam(r) == rec.team
}

// proxyPort forwards an allowed request to the port.
func (s *portRoutes) proxyPort(w http.ResponseWriter, r *http.Request, t portTarget, rec portRecord) {
	agent, err := s.plane.Agent(r.Context(), rec.team, t.id)
	if err != nil {
		if errdefs.IsNotFound(err) {
			s.records.forget(t.id)
			sandboxGone(w, r, t.id, err)
			return
		}
		writeError(w, r, err)
		return
	}
	pr := &portRequest{id: t.id, port: t.port, agent: agent, credentials: s.credentialsIn(r, rec), host: maskedHost(rec.maskHost, t.port)}
	s.reverseProxy().ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), portRequestKey{}, pr)))
}

// credentialsIn returns the request's Authorization values that carry
// warren credentials: a Bearer that is an API key of this server or one of
// the sandbox's tokens. Basic, or a Bearer of the app's own, is not ours.
func (s *portRoutes) credentialsIn(r *http.Request, rec portRecord) []string {
	var out []string
	for _, v := range r.Header.Values("Authorization") {
		scheme, tok, ok := strings.Cut(strings.TrimSpace(v), " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			continue
		}
		tok = strings.TrimSpace(tok)
		if accesstoken.Equal(tok, rec.envd) || accesstoken.Equal(tok, rec.traffic) {
			out = append(out, v)
			continue
		}
		if _, err := s.authz.authenticate(r.Context(), tok); err == nil {
			out = append(out, v)
		}
	}
	return out
}

// portProxyError answers a request the tunnel could not carry: nothing
// listening is a 502 that says so.
func (s *portRoutes) portProxyError(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		return // the caller left; nobody to answer
	}
	var id string
	var port int
	if pr := portRequestOf(r.Context()); pr != nil {
		id, port = pr.id, pr.port
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		err = errors.New(ce.Message())
	}
	s.log.Debug("port proxy", "sandbox", id, "port", port, "err", err)
	writeError(w, r, fmt.Errorf("sandbox %s port %d: %v: %w", id, port, err, errdefs.ErrUnavailable))
}

// connectPort answers GET /sandboxes/{id}/ports/{port}/connect: it upgrades
// the connection (Upgrade: warren-tcp) and splices its raw bytes with a
// tunnel to the port, for `warren port-forward`.
func (s *portRoutes) connectPort(w http.ResponseWriter, r *http.Request) {
	if !strings.EqualFold(r.Header.Get("Upgrade"), tcpUpgrade) || !headerHasToken(r.Header, "Connection", "upgrade") {
		writeError(w, r, fmt.Errorf("this endpoint carries raw TCP: send Connection: Upgrade and Upgrade: %s: %w", tcpUpgrade, errdefs.ErrInvalid))
		return
	}
	port, err := strconv.Atoi(r.PathValue("port"))
	if err != nil {
		writeError(w, r, fmt.Errorf("port %q is not a number: %w", r.PathValue("port"), errdefs.ErrInvalid))
		return
	}
	if err := validPort(port); err != nil {
		writeError(w, r, err)
		return
	}
	id := r.PathValue("id")
	agent, err := s.plane.Agent(r.Context(), teamOf(r), id)
	if err != nil {
		writeError(w, r, err)
		return
	}
	tun, err := agent.DialPort(r.Context(), port)
	if err != nil {
		s.portProxyError(w, r.WithContext(context.WithValue(r.Context(), portRequestKey{}, &portRequest{id: id, port: port})), err)
		return
	}
	defer tun.Close()
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		writeError(w, r, fmt.Errorf("cannot take over this connection (HTTP/2?): use HTTP/1.1: %w", errdefs.ErrUnsupported))
		return
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Time{}) // the server's timeouts are for requests, not this
	if _, err := io.WriteString(brw, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: "+tcpUpgrade+"\r\n\r\n"); err != nil {
		return
	}
	if err := brw.Flush(); err != nil {
		return
	}
	// Bytes the client sent right behind its request are in brw's buffer.
	splice(conn, brw.Reader, tun, s.plane.ActivityMeter(id))
}

// splice copies both ways, passing each side's half-close on, until both
// directions end or one fails; bytes moving either way keep the sandbox
// from going idle (meter).
func splice(conn net.Conn, in io.Reader, tun *agentconn.TunnelConn, meter *session.ActivityMeter) {
	via := metered(tun, meter)
	errc := make(chan error, 2)
	go func() {
		_, err := io.Copy(via, in)
		if err == nil {
			err = tun.CloseWrite()
		}
		errc <- err
	}()
	go func() {
		_, err := io.Copy(conn, via)
		if cw, ok := conn.(interface{ CloseWrite() error }); ok && err == nil {
			err = cw.CloseWrite()
		}
		errc <- err
	}()
	for range 2 {
		if err := <-errc; err != nil {
			return // the deferred Closes end the other direction
		}
	}
}

func headerHasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// meteredConn is a tunnel to a port inside a sandbox that notes every read
// and write that moved bytes: the idle timeout counts port traffic, not
// only the request that opened the connection.
type meteredConn struct {
	net.Conn
	meter *session.ActivityMeter
}

// metered wraps c with meter; without one (no idle timeout) c is used as is.
func metered(c net.Conn, meter *session.ActivityMeter) net.Conn {
	if meter == nil {
		return c
	}
	return &meteredConn{Conn: c, meter: meter}
}

func (c *meteredConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.meter.Note()
	}
	return n, err
}

func (c *meteredConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if n > 0 {
		c.meter.Note()
	}
	return n, err
}
