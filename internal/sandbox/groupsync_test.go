package sandbox

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestGroupSync: callers that arrive while a sync runs share the next one,
// and none returns before a sync that began after it asked has finished.
func TestGroupSync(t *testing.T) {
	var g groupSync
	var runs atomic.Int32
	release := make(chan struct{})
	entered := make(chan struct{}, 10)
	fn := func() error {
		n := runs.Add(1)
		entered <- struct{}{}
		if n == 1 {
			<-release // the first sync is under way when the others ask
		}
		return nil
	}
	first := make(chan error, 1)
	go func() { first <- g.do(fn) }()
	<-entered

	const waiters = 10
	var wg sync.WaitGroup
	var returned atomic.Int32
	for range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := g.do(fn); err != nil {
				t.Error(err)
			}
			// Served by a sync that started after the call: the second.
			if runs.Load() < 2 {
				t.Error("returned before a sync that began after the call")
			}
			returned.Add(1)
		}()
	}
	time.Sleep(50 * time.Millisecond) // let every waiter queue behind the first sync
	if returned.Load() != 0 {
		t.Fatal("a waiter returned while only an earlier sync had run")
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if got := runs.Load(); got != 2 {
		t.Errorf("%d syncs for 1 + %d callers, want 2", got, waiters)
	}

	// An error reaches the callers the failing sync served.
	boom := errors.New("boom")
	if err := g.do(func() error { return boom }); !errors.Is(err, boom) {
		t.Errorf("error %v, want boom", err)
	}
}

// TestGroupSyncTicket: a caller holding a ticket taken before a sync began
// is served by that sync, under way or done, without starting another.
func TestGroupSyncTicket(t *testing.T) {
	var g groupSync
	var runs atomic.Int32
	release := make(chan struct{})
	entered := make(chan struct{}, 2)
	fn := func() error {
		runs.Add(1)
		entered <- struct{}{}
		<-release
		return nil
	}
	ticket := g.next()
	first := make(chan error, 1)
	go func() { first <- g.doFrom(ticket, fn) }()
	<-entered
	served := make(chan error, 1)
	go func() { served <- g.doFrom(ticket, fn) }()
	time.Sleep(20 * time.Millisecond)
	select {
	case <-served:
		t.Fatal("served before the sync finished")
	default:
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	if err := g.doFrom(ticket, fn); err != nil { // long done: at once
		t.Fatal(err)
	}
	if got := runs.Load(); got != 1 {
		t.Errorf("%d syncs for three callers of one ticket, want 1", got)
	}
	// A fresh ticket needs a run of its own.
	if err := g.do(fn); err != nil {
		t.Fatal(err)
	}
	if got := runs.Load(); got != 2 {
		t.Errorf("%d syncs after a fresh call, want 2", got)
	}
}
