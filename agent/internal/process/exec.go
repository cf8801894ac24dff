package process

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	agentv1 "github.com/warrenhq/warren/api/gen/warren/agent/v1"
)

// Exec runs one command to completion. The first event is `started` (or
// `exited` with an error when it could not start); the last is `exited`.
func (s *Service) Exec(ctx context.Context, req *connect.Request[agentv1.ExecRequest], stream *connect.ServerStream[agentv1.ExecEvent]) error {
	defer s.follows()()
	sp, err := s.buildSpec(req.Msg)
	if err != nil {
		var se startError
		if !errors.As(err, &se) {
			return err
		}
		return sendExited(stream, &agentv1.Exited{ExitCode: -1, Error: err.Error()})
	}
	r, err := s.start(sp)
	if err != nil {
		return sendExited(stream, &agentv1.Exited{ExitCode: -1, Error: err.Error()})
	}
	s.cfg.Log.Debug("exec started", "pid", r.pid, "argv0", sp.argv[0])
	if err := stream.Send(&agentv1.ExecEvent{Event: &agentv1.ExecEvent_Started{Started: &agentv1.Started{Pid: int32(r.pid)}}}); err != nil {
		// The client is gone before it learnt the pid: nobody can reach
		// this command any more, so it must not outlive the call.
		r.kill()
	}
	exited := r.follow(ctx, stream)
	return sendExited(stream, exited)
}

func sendExited(stream *connect.ServerStream[agentv1.ExecEvent], e *agentv1.Exited) error {
	return stream.Send(&agentv1.ExecEvent{Event: &agentv1.ExecEvent_Exited{Exited: e}})
}
