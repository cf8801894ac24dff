package startgate

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// acquireAsync starts an Acquire in the background and reports its
// outcome on the returned channel.
type outcome struct {
	release func()
	err     error
}

func acquireAsync(ctx context.Context, g *Gate) <-chan outcome {
	ch := make(chan outcome, 1)
	go func() {
		r, err := g.Acquire(ctx)
		ch <- outcome{r, err}
	}()
	return ch
}

// waitFor polls until cond holds (the gate's queue is filled by
// goroutines).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// enqueue starts an Acquire and waits until it is queued, so that the
// order of arrival is known.
func enqueue(t *testing.T, ctx context.Context, g *Gate) <-chan outcome {
	t.Helper()
	before := g.Stats().Waiting
	ch := acquireAsync(ctx, g)
	waitFor(t, "the start to queue", func() bool { return g.Stats().Waiting == before+1 })
	return ch
}

func mustGet(t *testing.T, ch <-chan outcome) func() {
	t.Helper()
	select {
	case o := <-ch:
		if o.err != nil {
			t.Fatalf("Acquire: %v", o.err)
		}
		return o.release
	case <-time.After(10 * time.Second):
		t.Fatal("Acquire did not return")
		return nil
	}
}

func mustWait(t *testing.T, ch <-chan outcome) {
	t.Helper()
	select {
	case o := <-ch:
		t.Fatalf("Acquire returned (err %v) while it should wait", o.err)
	case <-time.After(20 * time.Millisecond):
	}
}

func TestUnboundedAdmitsAll(t *testing.T) {
	for _, g := range []*Gate{nil, New(0), New(-3)} {
		for range 100 {
			release, err := g.Acquire(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			defer release()
		}
	}
}

func TestFirstComeFirstServed(t *testing.T) {
	ctx := context.Background()
	g := New(2)
	r1, _ := g.Acquire(ctx)
	r2, _ := g.Acquire(ctx)
	var queued []<-chan outcome
	for range 4 {
		queued = append(queued, enqueue(t, ctx, g))
	}
	if s := g.Stats(); s.Running != 2 || s.Waiting != 4 {
		t.Fatalf("stats %+v, want 2 running, 4 waiting", s)
	}
	// Each release admits exactly the oldest waiter.
	r1()
	r3 := mustGet(t, queued[0])
	mustWait(t, queued[1])
	r2()
	r4 := mustGet(t, queued[1])
	r3()
	r4()
	r5, r6 := mustGet(t, queued[2]), mustGet(t, queued[3])
	r5()
	r6()
	s := g.Stats()
	if s.Running != 0 || s.Waiting != 0 || s.Admitted != 6 || s.Queued != 4 {
		t.Fatalf("stats after all released %+v, want none running or waiting, 6 admitted, 4 queued", s)
	}
}

func TestBackgroundWaitsBehindNormal(t *testing.T) {
	ctx := context.Background()
	bg := WithPriority(ctx, Background)
	g := New(1)
	r, _ := g.Acquire(ctx)
	refill := enqueue(t, bg, g)
	create := enqueue(t, ctx, g)
	r()
	rc := mustGet(t, create) // the later Normal start goes first
	mustWait(t, refill)
	rc()
	mustGet(t, refill)()
	if s := g.Stats(); s.Running != 0 || s.Waiting != 0 {
		t.Fatalf("stats %+v, want none running or waiting", s)
	}
}

func TestCancelLeavesQueue(t *testing.T) {
	g := New(1)
	r, _ := g.Acquire(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	gone := enqueue(t, ctx, g)
	next := enqueue(t, context.Background(), g)
	cancel()
	o := <-gone
	if !errors.Is(o.err, context.Canceled) || o.release != nil {
		t.Fatalf("cancelled Acquire: release %v, err %v; want context.Canceled and no release", o.release != nil, o.err)
	}
	if s := g.Stats(); s.Waiting != 1 || s.Cancelled != 1 {
		t.Fatalf("stats %+v, want 1 waiting, 1 cancelled", s)
	}
	r()
	mustGet(t, next)() // the slot went past the cancelled start
	if s := g.Stats(); s.Running != 0 || s.Waiting != 0 {
		t.Fatalf("stats %+v, want none running or waiting", s)
	}
}

// TestCancelRaceLeaksNothing cancels waiters while slots are released, so
// that some are granted a slot as their ctx ends: every slot must come
// back.
func TestCancelRaceLeaksNothing(t *testing.T) {
	g := New(3)
	var wg sync.WaitGroup
	for i := range 300 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i%7)*100*time.Microsecond)
			defer cancel()
			if release, err := g.Acquire(ctx); err == nil {
				time.Sleep(50 * time.Microsecond)
				release()
				release() // a second call frees nothing more
			}
		}()
	}
	wg.Wait()
	s := g.Stats()
	if s.Running != 0 || s.Waiting != 0 {
		t.Fatalf("stats %+v: a slot or a waiter leaked", s)
	}
	if s.Admitted+s.Cancelled < 300 {
		t.Fatalf("stats %+v: admitted + cancelled < 300 starts", s)
	}
	// The gate still admits its full limit.
	for range 3 {
		if _, err := g.Acquire(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

func TestPriorityOf(t *testing.T) {
	if PriorityOf(context.Background()) != Normal {
		t.Fatal("default priority is not Normal")
	}
	if PriorityOf(WithPriority(context.Background(), Background)) != Background {
		t.Fatal("WithPriority(Background) is not read back")
	}
	if PriorityOf(WithPriority(context.Background(), Priority(9))) != Normal {
		t.Fatal("an unknown priority is not Normal")
	}
}
