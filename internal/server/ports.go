package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/internal/agentconn"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/store"
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

// tunnelKey carries a proxied request's sandbox agent and port to the
// transport's dialer.
type tunnelKey struct{}

type tunnelTarget struct {
	agent *agentconn.Conn
	port  int
}

// portProxy forwards HTTP (and upgraded WebSocket) traffic to servers inside
// sandboxes. Connections are tunnels through the agent, pooled per sandbox
// and port: the pool key is "<id>:<port>", and a request reaches the proxy
// only after its key's team was checked against the sandbox's.
type portProxy struct {
	once  sync.Once
	proxy *httputil.ReverseProxy
}

func (s *Server) portProxy() *httputil.ReverseProxy {
	s.ports.once.Do(func() {
		tr := &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				t, ok := ctx.Value(tunnelKey{}).(tunnelTarget)
				if !ok {
					return nil, errors.New("port proxy: request without a tunnel target")
				}
				return t.agent.DialPort(ctx, t.port)
			},
			MaxIdleConnsPerHost: 16,
			IdleConnTimeout:     30 * time.Second,
			DisableCompression:  true,
		}
		s.ports.proxy = &httputil.ReverseProxy{
			Rewrite: func(pr *httputil.ProxyRequest) {
				t := pr.In.Context().Value(portTargetKey{}).(portTarget)
				pr.Out.URL.Scheme = "http"
				pr.Out.URL.Host = net.JoinHostPort(t.id, strconv.Itoa(t.port))
				pr.Out.Host = pr.In.Host // servers that check Host see what the user typed
				pr.SetXForwarded()
				// The sandbox's code is not to see the caller's credentials.
				pr.Out.Header.Del("X-API-Key")
				if pr.In.Header.Get("X-API-Key") == "" {
					pr.Out.Header.Del("Authorization")
				}
				pr.Out.Header.Del("E2b-Sandbox-Id")
				pr.Out.Header.Del("E2b-Sandbox-Port")
				pr.Out.Header.Del("X-Access-Token")
				pr.Out.Header.Del("E2b-Traffic-Access-Token")
			},
			Transport:     tr,
			FlushInterval: -1, // server-sent events and streamed bodies pass at once
			ErrorHandler:  s.portProxyError,
		}
	})
	return s.ports.proxy
}

type portTargetKey struct{}

// proxyPort serves a request routed to a port inside a sandbox; the caller
// has checked that it may reach the port.
func (s *Server) proxyPort(rec store.Sandbox, port int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		agent, err := s.deps.Sessions.Agent(r.Context(), rec.Team, rec.ID)
		if err != nil {
			if errdefs.IsNotFound(err) {
				s.sandboxGone(w, r, rec.ID, err)
				return
			}
			writeError(w, r, err)
			return
		}
		t := portTarget{id: rec.ID, port: port}
		ctx := context.WithValue(r.Context(), tunnelKey{}, tunnelTarget{agent: agent, port: port})
		ctx = context.WithValue(ctx, portTargetKey{}, t)
		s.portProxy().ServeHTTP(w, r.WithContext(ctx))
	}
}

// portProxyError answers a request the tunnel could not carry: nothing
// listening is a 502 that says so.
func (s *Server) portProxyError(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		return // the caller left; nobody to answer
	}
	t, _ := r.Context().Value(portTargetKey{}).(portTarget)
	var ce *connect.Error
	if errors.As(err, &ce) {
		err = errors.New(ce.Message())
	}
	s.deps.Log.Debug("port proxy", "sandbox", t.id, "port", t.port, "err", err)
	writeError(w, r, fmt.Errorf("sandbox %s port %d: %v: %w", t.id, t.port, err, errdefs.ErrUnavailable))
}

// connectPort answers GET /sandboxes/{id}/ports/{port}/connect: it upgrades
// the connection (Upgrade: warren-tcp) and splices its raw bytes with a
// tunnel to the port, for `warren port-forward`.
func (s *Server) connectPort(w http.ResponseWriter, r *http.Request) {
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
	agent, err := s.deps.Sessions.Agent(r.Context(), teamOf(r), id)
	if err != nil {
		writeError(w, r, err)
		return
	}
	tun, err := agent.DialPort(r.Context(), port)
	if err != nil {
		s.portProxyError(w, r.WithContext(context.WithValue(r.Context(), portTargetKey{}, portTarget{id: id, port: port})), err)
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
	splice(conn, brw.Reader, tun)
}

// splice copies both ways, passing each side's half-close on, until both
// directions end or one fails.
func splice(conn net.Conn, in io.Reader, tun *agentconn.TunnelConn) {
	errc := make(chan error, 2)
	go func() {
		_, err := io.Copy(tun, in)
		if err == nil {
			err = tun.CloseWrite()
		}
		errc <- err
	}()
	go func() {
		_, err := io.Copy(conn, tun)
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
