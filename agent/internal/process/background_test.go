package process

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	agentv1 "github.com/warrenhq/warren/api/gen/warren/agent/v1"
	"github.com/warrenhq/warren/api/gen/warren/agent/v1/agentv1connect"
)

func startBG(t *testing.T, c agentv1connect.ProcessServiceClient, tag string, argv ...string) *agentv1.ProcessInfo {
	t.Helper()
	res, err := c.Start(context.Background(), connect.NewRequest(&agentv1.StartRequest{Exec: &agentv1.ExecRequest{Argv: argv}, Tag: tag}))
	if err != nil {
		t.Fatal(err)
	}
	p := res.Msg.GetProcess()
	t.Cleanup(func() {
		_, _ = c.SendSignal(context.Background(), connect.NewRequest(&agentv1.SendSignalRequest{Process: &agentv1.ProcessRef{Pid: p.GetPid()}, Signal: "SIGKILL"}))
	})
	return p
}

// collected is what a Connect stream said.
type collected struct {
	stdout  strings.Builder
	offsets []uint64 // offset of every stdout chunk
	exit    *agentv1.ProcessExited
}

// connectUntil reads a Connect stream until it ends or until stop says so.
func connectUntil(t *testing.T, c agentv1connect.ProcessServiceClient, ref *agentv1.ProcessRef, from uint64, stop func(*collected) bool) *collected {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := c.Connect(ctx, connect.NewRequest(&agentv1.ConnectRequest{Process: ref, StdoutOffset: from}))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	got := &collected{}
	for st.Receive() {
		switch e := st.Msg().Event.(type) {
		case *agentv1.ProcessEvent_Output:
			if e.Output.Stream == agentv1.Stream_STREAM_STDOUT {
				if want := from + uint64(got.stdout.Len()); e.Output.Offset != want {
					t.Fatalf("chunk at offset %d, want %d", e.Output.Offset, want)
				}
				got.offsets = append(got.offsets, e.Output.Offset)
				got.stdout.Write(e.Output.Data)
			}
		case *agentv1.ProcessEvent_Exited:
			got.exit = e.Exited
		}
		if stop != nil && stop(got) {
			return got
		}
	}
	if err := st.Err(); err != nil && ctx.Err() == nil {
		t.Fatal(err)
	}
	return got
}

func TestBackgroundReplayFollowAndSignal(t *testing.T) {
	c, _ := newClient(t)
	p := startBG(t, c, "counter", "sh", "-c", `i=0; while :; do echo $i; i=$((i+1)); sleep 0.02; done`)
	if p.GetPid() <= 0 || p.GetTag() != "counter" || p.GetState() != agentv1.ProcessState_PROCESS_STATE_RUNNING {
		t.Fatalf("start answered %v", p)
	}
	// The tag is taken while the process runs.
	_, err := c.Start(context.Background(), connect.NewRequest(&agentv1.StartRequest{Exec: &agentv1.ExecRequest{Argv: []string{"true"}}, Tag: "counter"}))
	if connect.CodeOf(err) != connect.CodeAlreadyExists {
		t.Fatalf("duplicate tag: %v", err)
	}

	ref := &agentv1.ProcessRef{Tag: "counter"}
	first := connectUntil(t, c, ref, 0, func(g *collected) bool { return strings.Count(g.stdout.String(), "\n") >= 5 })
	if !strings.HasPrefix(first.stdout.String(), "0\n1\n2\n3\n4\n") {
		t.Fatalf("first connect: %q", first.stdout.String())
	}
	// Reconnecting replays from 0; from an offset, from there.
	second := connectUntil(t, c, ref, 0, func(g *collected) bool { return strings.Count(g.stdout.String(), "\n") >= 10 })
	if !strings.HasPrefix(second.stdout.String(), first.stdout.String()) {
		t.Fatalf("replay %q does not start with %q", second.stdout.String(), first.stdout.String())
	}
	connectUntil(t, c, ref, 4, func(g *collected) bool { return g.stdout.Len() >= 4 })

	if _, err := c.SendSignal(context.Background(), connect.NewRequest(&agentv1.SendSignalRequest{Process: ref, Signal: "SIGSEGV"})); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("SIGSEGV: %v", err)
	}
	if _, err := c.SendSignal(context.Background(), connect.NewRequest(&agentv1.SendSignalRequest{Process: ref, Signal: "TERM"})); err != nil {
		t.Fatal(err)
	}
	end := connectUntil(t, c, ref, 0, nil)
	if end.exit == nil || end.exit.Exited.GetExitCode() != 128+15 {
		t.Fatalf("exit after SIGTERM: %v", end.exit)
	}
	if end.exit.StdoutEnd != uint64(end.stdout.Len()) {
		t.Fatalf("exit says %d stdout bytes, replay had %d", end.exit.StdoutEnd, end.stdout.Len())
	}
	list, err := c.List(context.Background(), connect.NewRequest(&agentv1.ListRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	var found *agentv1.ProcessInfo
	for _, q := range list.Msg.GetProcesses() {
		if q.GetPid() == p.GetPid() {
			found = q
		}
	}
	if found == nil || found.GetState() != agentv1.ProcessState_PROCESS_STATE_EXITED || found.GetExited().GetExitCode() != 143 || found.GetTag() != "counter" {
		t.Fatalf("listed %v", found)
	}
	// An exited process's tag is free again.
	startBG(t, c, "counter", "true")
}

func TestBackgroundStdin(t *testing.T) {
	c, _ := newClient(t)
	p := startBG(t, c, "", "cat")
	ref := &agentv1.ProcessRef{Pid: p.GetPid()}
	for i := range 3 {
		if _, err := c.SendInput(context.Background(), connect.NewRequest(&agentv1.SendInputRequest{Process: ref, Data: fmt.Appendf(nil, "line %d\n", i)})); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.CloseStdin(context.Background(), connect.NewRequest(&agentv1.CloseStdinRequest{Process: ref})); err != nil {
		t.Fatal(err)
	}
	got := connectUntil(t, c, ref, 0, nil)
	if got.stdout.String() != "line 0\nline 1\nline 2\n" || got.exit == nil || got.exit.Exited.GetExitCode() != 0 {
		t.Fatalf("cat: %q, exit %v", got.stdout.String(), got.exit)
	}
	_, err := c.SendInput(context.Background(), connect.NewRequest(&agentv1.SendInputRequest{Process: ref, Data: []byte("x")}))
	if connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Fatalf("input after close: %v", err)
	}
	_, err = c.SendInput(context.Background(), connect.NewRequest(&agentv1.SendInputRequest{Process: &agentv1.ProcessRef{Tag: "nope"}, Data: []byte("x")}))
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("unknown tag: %v", err)
	}
}

func TestWatchOutputResumesFromOffsets(t *testing.T) {
	c, _ := newClient(t)
	p := startBG(t, c, "", "sh", "-c", "echo one; echo two >&2; echo three")
	watch := func(instance string, from map[int32]*agentv1.StreamOffsets) (string, string, *agentv1.ProcessExited) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		st, err := c.WatchOutput(ctx, connect.NewRequest(&agentv1.WatchOutputRequest{Instance: instance, From: from}))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		var hello string
		var out strings.Builder
		var exit *agentv1.ProcessExited
		for st.Receive() {
			switch e := st.Msg().Event.(type) {
			case *agentv1.ProcessEvent_Hello:
				hello = e.Hello.Instance
			case *agentv1.ProcessEvent_Output:
				if e.Output.Pid == p.GetPid() {
					fmt.Fprintf(&out, "%d:%d:%s|", e.Output.Stream, e.Output.Offset, e.Output.Data)
				}
			case *agentv1.ProcessEvent_Exited:
				if e.Exited.Pid == p.GetPid() {
					exit = e.Exited
				}
			case *agentv1.ProcessEvent_Synced:
				if exit != nil {
					return hello, out.String(), exit
				}
			}
		}
		if err := st.Err(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatal(err)
		}
		return hello, out.String(), exit
	}
	// Wait for the exit so the output is complete.
	connectUntil(t, c, &agentv1.ProcessRef{Pid: p.GetPid()}, 0, nil)
	inst, all, exit := watch("", nil)
	if all != "1:0:one\nthree\n|2:0:two\n|" || exit == nil {
		t.Fatalf("watch from nothing: %q exit %v", all, exit)
	}
	_, rest, _ := watch(inst, map[int32]*agentv1.StreamOffsets{p.GetPid(): {Seq: p.GetSeq(), Stdout: 4, Stderr: 4}})
	if rest != "1:4:three\n|" {
		t.Fatalf("watch from offsets: %q", rest)
	}
	// Offsets of another agent instance are ignored.
	_, again, _ := watch("other", map[int32]*agentv1.StreamOffsets{p.GetPid(): {Seq: p.GetSeq(), Stdout: 4, Stderr: 4}})
	if again != all {
		t.Fatalf("watch with a stale instance: %q", again)
	}
}
