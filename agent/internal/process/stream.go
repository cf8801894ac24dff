package process

import (
	"context"

	"connectrpc.com/connect"

	agentv1 "github.com/warrenhq/warren/api/gen/warren/agent/v1"
)

// cursor is how far one stream has got with one process.
type cursor struct {
	seq       uint64
	out, err  uint64
	announced bool
	exitSent  bool
}

// Connect streams one process's output from the requested offsets, then
// live, then its exit.
func (s *Service) Connect(ctx context.Context, req *connect.Request[agentv1.ConnectRequest], stream *connect.ServerStream[agentv1.ProcessEvent]) error {
	p, err := s.reg.lookup(req.Msg.GetProcess())
	if err != nil {
		return err
	}
	cursors := map[int]*cursor{p.pid: {seq: p.seq, out: req.Msg.GetStdoutOffset(), err: req.Msg.GetStderrOffset()}}
	only := func(q *proc) bool { return q == p }
	return s.follow(ctx, only, cursors, stream.Send, false)
}

// WatchOutput streams every background process's starts, output and exits,
// resuming from the offsets the daemon holds.
func (s *Service) WatchOutput(ctx context.Context, req *connect.Request[agentv1.WatchOutputRequest], stream *connect.ServerStream[agentv1.ProcessEvent]) error {
	if err := stream.Send(&agentv1.ProcessEvent{Event: &agentv1.ProcessEvent_Hello{Hello: &agentv1.Hello{Instance: s.reg.instance}}}); err != nil {
		return err
	}
	cursors := map[int]*cursor{}
	if req.Msg.GetInstance() == s.reg.instance {
		for pid, off := range req.Msg.GetFrom() {
			cursors[int(pid)] = &cursor{seq: off.GetSeq(), out: off.GetStdout(), err: off.GetStderr()}
		}
	}
	all := func(*proc) bool { return true }
	return s.follow(ctx, all, cursors, stream.Send, true)
}

// follow sends, for every process keep admits, its start, its output past
// the cursors and its exit, and then waits for the next change. Connect
// (watch false) ends after its process's exit; WatchOutput sends `synced`
// after its first pass and runs until the daemon goes away.
func (s *Service) follow(ctx context.Context, keep func(*proc) bool, cursors map[int]*cursor,
	send func(*agentv1.ProcessEvent) error, watch bool) error {
	first := true
	for {
		procs, changed := s.reg.snapshot()
		live := make(map[int]bool, len(procs))
		done := !watch
		for _, p := range procs {
			if !keep(p) {
				continue
			}
			live[p.pid] = true
			c := cursors[p.pid]
			if c == nil || c.seq != p.seq {
				c = &cursor{seq: p.seq} // a new process, or a reused pid
				cursors[p.pid] = c
			}
			if err := s.sendProcess(p, c, send); err != nil {
				return err
			}
			if !c.exitSent {
				done = false
			}
		}
		for pid := range cursors {
			if !live[pid] && watch {
				delete(cursors, pid) // forgotten processes
			}
		}
		if done {
			return nil
		}
		if first && watch {
			if err := send(&agentv1.ProcessEvent{Event: &agentv1.ProcessEvent_Synced{Synced: &agentv1.Synced{}}}); err != nil {
				return err
			}
		}
		first = false
		select {
		case <-ctx.Done():
			return connect.NewError(connect.CodeCanceled, ctx.Err())
		case <-changed:
		}
	}
}

// sendProcess brings one process's cursor up to date.
func (s *Service) sendProcess(p *proc, c *cursor, send func(*agentv1.ProcessEvent) error) error {
	if !c.announced {
		if err := send(&agentv1.ProcessEvent{Event: &agentv1.ProcessEvent_Started{Started: s.reg.info(p)}}); err != nil {
			return err
		}
		c.announced = true
	}
	if c.exitSent {
		return nil
	}
	// Read the exit first: output read after it is then surely complete.
	exit := s.reg.exitOf(p)
	for _, st := range []agentv1.Stream{agentv1.Stream_STREAM_STDOUT, agentv1.Stream_STREAM_STDERR} {
		off := &c.out
		if st == agentv1.Stream_STREAM_STDERR {
			off = &c.err
		}
		for {
			data, at := s.reg.read(p, st, *off, chunkSize)
			if len(data) == 0 {
				break
			}
			ev := &agentv1.ProcessOutput{Pid: int32(p.pid), Seq: p.seq, Stream: st, Offset: at, Data: data}
			if err := send(&agentv1.ProcessEvent{Event: &agentv1.ProcessEvent_Output{Output: ev}}); err != nil {
				return err
			}
			*off = at + uint64(len(data))
		}
	}
	if exit != nil {
		if err := send(&agentv1.ProcessEvent{Event: &agentv1.ProcessEvent_Exited{Exited: exit}}); err != nil {
			return err
		}
		c.exitSent = true
	}
	return nil
}
