package process

import (
	"context"

	"connectrpc.com/connect"

	agentv1 "github.com/warrenhq/warren/api/gen/warren/agent/v1"
)

// Ping answers at once so the daemon can tell the agent is up.
func (s *Service) Ping(context.Context, *connect.Request[agentv1.PingRequest]) (*connect.Response[agentv1.PingResponse], error) {
	return connect.NewResponse(&agentv1.PingResponse{Version: s.cfg.Version}), nil
}
