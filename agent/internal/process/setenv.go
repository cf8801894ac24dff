package process

import (
	"context"
	"fmt"
	"strings"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/agent/internal/initproc"
	agentv1 "github.com/warrenhq/warren/api/gen/warren/agent/v1"
)

// SetEnv replaces the sandbox's environment variables, which every later
// command (exec, background process, PTY, tool) starts from.
func (s *Service) SetEnv(_ context.Context, req *connect.Request[agentv1.SetEnvRequest]) (*connect.Response[agentv1.SetEnvResponse], error) {
	for k, v := range req.Msg.GetEnv() {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("environment variable %q: names must be non-empty without '=' or NUL, values without NUL", k))
		}
	}
	initproc.SetSandboxEnv(req.Msg.GetEnv())
	return connect.NewResponse(&agentv1.SetEnvResponse{}), nil
}
