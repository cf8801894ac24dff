package procs

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	agentv1 "github.com/warrenhq/warren/api/gen/warren/agent/v1"
	"github.com/warrenhq/warren/api/gen/warren/agent/v1/agentv1connect"
)

func TestFileRingOffsets(t *testing.T) {
	r := &fileRing{path: filepath.Join(t.TempDir(), "r"), size: 8}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	write := func(off uint64, data string, wantNew string) {
		t.Helper()
		at, fresh, err := r.write(off, []byte(data))
		must(err)
		if string(fresh) != wantNew || (len(fresh) > 0 && at+uint64(len(fresh)) != r.end) {
			t.Fatalf("write %q at %d: new bytes %q at %d, want %q ending at %d", data, off, fresh, at, wantNew, r.end)
		}
	}
	write(0, "abcde", "abcde")
	write(3, "defgh", "fgh") // overlaps what is held: only "fgh" is new
	write(2, "cde", "")      // a replay of what is held
	if r.start != 0 || r.end != 8 {
		t.Fatalf("span %d-%d", r.start, r.end)
	}
	write(8, "ijk", "ijk") // wraps: "abc" dropped
	got, at, err := r.read(0, 100)
	must(err)
	if string(got) != "defghijk" || at != 3 {
		t.Fatalf("read = %q at %d", got, at)
	}
	write(20, "XY", "XY") // a gap: the agent dropped 12-20
	got, at, err = r.read(0, 100)
	must(err)
	if string(got) != "XY" || at != 20 {
		t.Fatalf("after a gap: %q at %d", got, at)
	}
	write(22, strings.Repeat("z", 20), strings.Repeat("z", 20)) // larger than the ring
	if got, at, _ = r.read(0, 3); string(got) != "zzz" || at != 34 || r.end != 42 {
		t.Fatalf("after an oversized write: %q at %d, end %d", got, at, r.end)
	}
}

// fakeAgent scripts a WatchOutput stream and records what it was asked.
type fakeAgent struct {
	agentv1connect.UnimplementedProcessServiceHandler
	events []*agentv1.ProcessEvent
	reqs   chan *agentv1.WatchOutputRequest
}

func (f *fakeAgent) WatchOutput(ctx context.Context, req *connect.Request[agentv1.WatchOutputRequest], st *connect.ServerStream[agentv1.ProcessEvent]) error {
	f.reqs <- req.Msg
	for _, ev := range f.events {
		if err := st.Send(ev); err != nil {
			return err
		}
	}
	<-ctx.Done()
	return nil
}

type clientOf struct {
	c agentv1connect.ProcessServiceClient
}

func (c clientOf) Process() agentv1connect.ProcessServiceClient { return c.c }

func serveFake(t *testing.T, f *fakeAgent) Agent {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(agentv1connect.NewProcessServiceHandler(f))
	srv := httptest.NewUnstartedServer(mux)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return clientOf{agentv1connect.NewProcessServiceClient(srv.Client(), srv.URL)}
}

func hello(inst string) *agentv1.ProcessEvent {
	return &agentv1.ProcessEvent{Event: &agentv1.ProcessEvent_Hello{Hello: &agentv1.Hello{Instance: inst}}}
}

func output(pid int32, off uint64, data string) *agentv1.ProcessEvent {
	return &agentv1.ProcessEvent{Event: &agentv1.ProcessEvent_Output{Output: &agentv1.ProcessOutput{
		Pid: pid, Seq: 1, Stream: agentv1.Stream_STREAM_STDOUT, Offset: off, Data: []byte(data)}}}
}

var synced = &agentv1.ProcessEvent{Event: &agentv1.ProcessEvent_Synced{Synced: &agentv1.Synced{}}}

func TestCollectorPersistsAndResumes(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	first := &fakeAgent{reqs: make(chan *agentv1.WatchOutputRequest, 4), events: []*agentv1.ProcessEvent{
		hello("i1"),
		{Event: &agentv1.ProcessEvent_Started{Started: &agentv1.ProcessInfo{Pid: 5, Seq: 1, Tag: "t", Argv: []string{"sh"}}}},
		output(5, 0, "0123456789"),
		output(5, 10, "abcdefghij"),
		{Event: &agentv1.ProcessEvent_Exited{Exited: &agentv1.ProcessExited{Pid: 5, Seq: 1, Exited: &agentv1.Exited{ExitCode: 3}}}},
		synced,
	}}
	m := New(Options{Dir: dir, RingBytes: 16})
	m.Attach("sb1", serveFake(t, first))
	col, ok := m.Get("sb1")
	if !ok {
		t.Fatal("no collector")
	}
	list := col.List(ctx)
	if len(list) != 1 || list[0].Tag != "t" || list[0].Exit == nil || list[0].Exit.ExitCode != 3 {
		t.Fatalf("list: %+v", list)
	}
	p, err := col.Get(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	var exit *Exit
	err = col.Follow(ctx, p, 0, 0, true, func(ev Event) error {
		if ev.Exit != nil {
			exit = ev.Exit
		} else if ev.Offset != 4+uint64(got.Len()) {
			t.Fatalf("event at offset %d after %d bytes", ev.Offset, got.Len())
		}
		got.Write(ev.Data)
		return nil
	})
	if err != nil || got.String() != "456789abcdefghij" || exit == nil || exit.ExitCode != 3 {
		t.Fatalf("follow: %q exit %+v err %v", got.String(), exit, err)
	}
	if _, err := col.Get(ctx, "nope"); err == nil {
		t.Fatal("an unknown tag was found")
	}
	m.Close()

	// A new daemon resumes from the persisted offsets of the same instance.
	second := &fakeAgent{reqs: make(chan *agentv1.WatchOutputRequest, 4), events: []*agentv1.ProcessEvent{hello("i2"), synced}}
	m = New(Options{Dir: dir, RingBytes: 16})
	defer m.Close()
	m.Attach("sb1", serveFake(t, second))
	req := <-second.reqs
	if from := req.GetFrom()[5]; req.GetInstance() != "i1" || from.GetSeq() != 1 || from.GetStdout() != 20 {
		t.Fatalf("resumed with %v", req)
	}
	// The agent says it is a new instance: the old records go.
	col, _ = m.Get("sb1")
	if list := col.List(ctx); len(list) != 0 {
		t.Fatalf("records of an old agent instance kept: %+v", list)
	}
	if _, err := os.Stat(ringPath(filepath.Join(dir, "sb1"), 5, 1, "out")); !os.IsNotExist(err) {
		t.Fatalf("ring file of an old instance: %v", err)
	}
	if err := m.Remove("sb1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "sb1")); !os.IsNotExist(err) {
		t.Fatalf("Remove left %v", err)
	}
	if err := m.Remove("../x"); err == nil {
		t.Fatal("Remove took a path")
	}
}
