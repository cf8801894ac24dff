package tools

import (
	"context"

	"connectrpc.com/connect"

	agentv1 "github.com/warrenhq/warren/api/gen/warren/agent/v1"
)

// List describes every tool, sorted by name, with its params' JSON Schema.
func (s *Service) List(ctx context.Context, req *connect.Request[agentv1.ListToolsRequest]) (*connect.Response[agentv1.ListToolsResponse], error) {
	out := &agentv1.ListToolsResponse{}
	for _, name := range s.names {
		t := s.tools[name]
		out.Tools = append(out.Tools, &agentv1.ToolSpec{Name: t.name, Description: t.description, ParamsSchema: t.schema})
	}
	return connect.NewResponse(out), nil
}
