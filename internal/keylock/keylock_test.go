package keylock

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

func TestLocks(t *testing.T) {
	var l Locks
	var wg sync.WaitGroup
	// Each key has its own counter: the map is only read concurrently, and
	// a counter is written under its key's lock.
	a, b := 0, 0
	counts := map[string]*int{"a": &a, "b": &b}
	for i := 0; i < 200; i++ {
		wg.Add(1)
		go func(key string) {
			defer wg.Done()
			unlock := l.Lock(key)
			*counts[key]++ // a data race unless the key's lock serialises it
			unlock()
		}([]string{"a", "b"}[i%2])
	}
	wg.Wait()
	if a != 100 || b != 100 {
		t.Fatalf("counts a=%d b=%d", a, b)
	}
	if len(l.m) != 0 {
		t.Fatalf("%d entries left after every unlock", len(l.m))
	}
}

func TestTryLock(t *testing.T) {
	var l Locks
	unlock, ok := l.TryLock("a")
	if !ok {
		t.Fatal("TryLock of a free key failed")
	}
	if _, ok := l.TryLock("a"); ok {
		t.Fatal("TryLock of a held key succeeded")
	}
	if !l.Busy("a") || l.Busy("b") {
		t.Fatal("Busy disagrees with the locks held")
	}
	other, ok := l.TryLock("b")
	if !ok {
		t.Fatal("TryLock of another key failed")
	}
	other()
	unlock()
	again, ok := l.TryLock("a")
	if !ok {
		t.Fatal("TryLock after unlock failed")
	}
	again()
	if len(l.m) != 0 {
		t.Fatalf("%d entries left after every unlock", len(l.m))
	}
}

func TestLockContext(t *testing.T) {
	var l Locks
	held := l.Lock("a")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := l.LockContext(ctx, "a"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("LockContext of a held key: %v, want the deadline", err)
	}
	held()
	// The waiter that gave up takes and drops the lock: the key frees.
	unlock, err := l.LockContext(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	unlock()
	deadline := time.Now().Add(5 * time.Second)
	for {
		l.mu.Lock()
		n := len(l.m)
		l.mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d entries left after every unlock", n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestRLockSharesAndExcludes(t *testing.T) {
	var l Locks
	r1, r2 := l.RLock("a"), l.RLock("a") // readers share
	if _, ok := l.TryLock("a"); ok {
		t.Fatal("a writer got in beside readers")
	}
	got := make(chan func())
	go func() { got <- l.Lock("a") }()
	r1()
	select {
	case <-got:
		t.Fatal("a writer got in while a reader held the key")
	case <-time.After(20 * time.Millisecond):
	}
	r2()
	(<-got)()
	if l.Busy("a") {
		t.Fatal("the key is busy after every unlock")
	}
}
