// Package tunnel serves warren.agent.v1.TunnelService: TCP connections to
// servers listening inside the sandbox, carried over the agent link. The
// agent dials 127.0.0.1 in the sandbox's own network namespace, so a port is
// reachable from the host even when the sandbox has no network at all.
package tunnel

import (
	"net"
	"net/http"
	"time"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/api/gen/warren/agent/v1/agentv1connect"
)

const (
	// ChunkSize bounds one data message in either direction.
	ChunkSize = 64 << 10
	// dialTimeout bounds connecting to the port: on loopback a listener
	// answers at once, so a slow dial means a full accept backlog.
	dialTimeout = 5 * time.Second
)

// Service implements agentv1connect.TunnelServiceHandler.
type Service struct {
	// host is the address dialed; always loopback in the agent, a seam for
	// tests.
	host   string
	dialer net.Dialer
}

var _ agentv1connect.TunnelServiceHandler = (*Service)(nil)

// New makes the service; it dials 127.0.0.1.
func New() *Service {
	return &Service{host: "127.0.0.1", dialer: net.Dialer{Timeout: dialTimeout}}
}

// Handle mounts the service on mux.
func (s *Service) Handle(mux *http.ServeMux, opts ...connect.HandlerOption) {
	mux.Handle(agentv1connect.NewTunnelServiceHandler(s, opts...))
}
