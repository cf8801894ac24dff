package process

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/warrenhq/warren/api/gen/process"
)

// flushRecorder is the server's ResponseWriter as the coalescer sees it:
// each Flush reports how many events had been written by then and waits
// for the test to let it return, so the test can queue events while the
// handler is inside a flush.
type flushRecorder struct {
	*httptest.ResponseRecorder
	written *int
	flushed chan int
	proceed chan struct{}
}

func (r flushRecorder) Flush() {
	r.flushed <- *r.written
	<-r.proceed
}

func TestFollowFeedFlushesOncePerReadyBatch(t *testing.T) {
	written := 0
	rec := flushRecorder{ResponseRecorder: httptest.NewRecorder(), written: &written, flushed: make(chan int), proceed: make(chan struct{})}
	c := &coalescer{ResponseWriter: rec}
	ctx := context.WithValue(context.Background(), coalescerKey{}, c)
	p := &proc{pid: 7, ended: make(chan struct{})}
	f := &feed{ch: make(chan feedChunk, feedDepth), done: make(chan struct{})}
	var events []*process.ProcessEvent
	// As connect-go does: write the message, then flush.
	send := func(ev *process.ProcessEvent) error {
		events = append(events, ev)
		written++
		c.Flush()
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- (&Service{}).followFeed(ctx, p, f, time.Hour, send) }()

	// Nothing else is ready after the start: it leaves on its own at once.
	if n := <-rec.flushed; n != 1 {
		t.Fatalf("first flush after %d events, want 1 (the start alone)", n)
	}
	f.ch <- feedChunk{data: []byte("a\n")}
	rec.proceed <- struct{}{}
	// A later event gets its own flush.
	if n := <-rec.flushed; n != 2 {
		t.Fatalf("second flush after %d events, want 2 (start, a)", n)
	}
	// While the handler is inside that flush, two chunks and the end
	// become ready together: they leave as one batch, whose flush is
	// connect-go's end-of-stream (or the server's when the handler returns).
	f.ch <- feedChunk{data: []byte("b\n")}
	f.ch <- feedChunk{data: []byte("c\n")}
	close(p.ended)
	rec.proceed <- struct{}{}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case n := <-rec.flushed:
		t.Fatalf("flushed after %d events inside the last batch", n)
	}
	c.Flush() // connect-go's flush after its end-of-stream message
	select {
	case n := <-rec.flushed:
		t.Fatalf("connect-go's last flush went through after %d events; the server's final one sends the batch with the stream's end", n)
	default:
	}
	var kinds []string
	for _, ev := range events {
		switch e := ev.Event.(type) {
		case *process.ProcessEvent_Start:
			kinds = append(kinds, "start")
		case *process.ProcessEvent_Data:
			kinds = append(kinds, string(e.Data.GetStdout()))
		case *process.ProcessEvent_End:
			kinds = append(kinds, "end")
		default:
			kinds = append(kinds, "?")
		}
	}
	if got, want := len(kinds), 5; got != want || kinds[0] != "start" || kinds[1] != "a\n" || kinds[2] != "b\n" || kinds[3] != "c\n" || kinds[4] != "end" {
		t.Fatalf("events %q, want start, a, b, c, end", kinds)
	}
}

func TestCoalescerPassesFlushesWithoutABatch(t *testing.T) {
	written := 0
	rec := flushRecorder{ResponseRecorder: httptest.NewRecorder(), written: &written, flushed: make(chan int, 1), proceed: make(chan struct{}, 1)}
	c := &coalescer{ResponseWriter: rec}
	rec.proceed <- struct{}{}
	c.Flush()
	if len(rec.flushed) != 1 {
		t.Fatal("a flush outside a batch was held")
	}
	var none *coalescer // a handler run without the middleware
	none.hold()
	none.release()
}
