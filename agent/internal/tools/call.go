package tools

import (
	"context"

	"connectrpc.com/connect"

	agentv1 "github.com/warrenhq/warren/api/gen/warren/agent/v1"
)

// Call runs one tool, streaming bash's output as progress events, and ends
// with the result.
func (s *Service) Call(ctx context.Context, req *connect.Request[agentv1.CallRequest], stream *connect.ServerStream[agentv1.CallEvent]) error {
	clientOK := true
	progress := func(data []byte) {
		if !clientOK {
			return
		}
		ev := &agentv1.CallEvent{Event: &agentv1.CallEvent_Progress{Progress: &agentv1.ToolProgress{Data: data}}}
		// A failed send means the client is gone; ctx ends with it and
		// stops the tool, so only further sends are skipped here.
		clientOK = stream.Send(ev) == nil
	}
	m := req.Msg
	res, err := s.Run(ctx, Request{Tool: m.GetTool(), Params: m.GetParams(), User: m.GetUser(), Cwd: m.GetCwd()}, progress)
	if err != nil {
		return err
	}
	out := &agentv1.ToolResult{Content: res.Content, IsError: res.IsError, DurationMs: uint64(res.Duration.Milliseconds())}
	if res.ExitCode != nil {
		code := int32(*res.ExitCode)
		out.ExitCode = &code
	}
	return stream.Send(&agentv1.CallEvent{Event: &agentv1.CallEvent_Result{Result: out}})
}
