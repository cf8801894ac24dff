package sandbox

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Pacing of a rollback's old root drop (see Host.Rollback).
const (
	// poolQuiet is how long the pool must go without a new volume (a
	// turn, a fork, a rollback's copy) before an old root is dropped.
	poolQuiet = 2 * time.Second
	// quietWaitMax bounds that wait on a pool that is never quiet.
	quietWaitMax = 30 * time.Second
	// maxWaitingRoots is how many old roots of one sandbox may wait: each
	// still shares blocks with the sandbox's snapshots, and every snapshot
	// of a lineage costs more the more volumes it has in the pool (about
	// 0.25 ms each). Past it the oldest is dropped at once.
	maxWaitingRoots = 4
)

// oldRootDrops drops the old roots rollbacks leave (the work a rollback
// leaves after it answers), each once the pool has been quiet, and counts
// the drops so that WaitSettled can wait for them before the pool is
// unmounted.
type oldRootDrops struct {
	mu      sync.Mutex
	wg      sync.WaitGroup
	closed  bool
	stop    chan struct{}             // closed by close: waits end
	waiting map[string][]*waitingDrop // by sandbox, oldest first
	// lastVolume is when the newest volume was made (UnixNano).
	lastVolume atomic.Int64
	// quiet, waitMax and maxWaiting override the constants (tests).
	quiet, waitMax time.Duration
	maxWaiting     int
}

// waitingDrop is one drop waiting; now is closed to run it at once.
type waitingDrop struct{ now chan struct{} }

// volumeMade notes that a volume was made now.
func (l *oldRootDrops) volumeMade() { l.lastVolume.Store(time.Now().UnixNano()) }

// whenQuiet runs fn in the background once the pool has gone poolQuiet
// without a new volume, after quietWaitMax at the latest, or at once when
// more than maxWaitingRoots of sandbox's wait. fn is not run if the host
// closes first (start-up's reconcile removes what it would have).
func (l *oldRootDrops) whenQuiet(sandbox string, fn func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	if l.stop == nil {
		l.stop = make(chan struct{})
		l.waiting = map[string][]*waitingDrop{}
	}
	d := &waitingDrop{now: make(chan struct{})}
	q := append(l.waiting[sandbox], d)
	maxWaiting := cmp.Or(l.maxWaiting, maxWaitingRoots)
	for len(q) > maxWaiting {
		close(q[0].now)
		q = q[1:]
	}
	l.waiting[sandbox] = q
	stop, deadline := l.stop, time.Now().Add(cmp.Or(l.waitMax, quietWaitMax))
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		ok := l.waitQuiet(stop, d.now, deadline)
		l.forget(sandbox, d)
		if ok {
			fn()
		}
	}()
}

// forget takes d off its sandbox's waiting list.
func (l *oldRootDrops) forget(sandbox string, d *waitingDrop) {
	l.mu.Lock()
	defer l.mu.Unlock()
	q := slices.DeleteFunc(l.waiting[sandbox], func(e *waitingDrop) bool { return e == d })
	if len(q) == 0 {
		delete(l.waiting, sandbox)
	} else {
		l.waiting[sandbox] = q
	}
}

// waitQuiet waits for the quiet, now or the deadline; false if stop
// closed first.
func (l *oldRootDrops) waitQuiet(stop, now <-chan struct{}, deadline time.Time) bool {
	quiet := cmp.Or(l.quiet, poolQuiet)
	for {
		at := time.Now()
		wake := time.Unix(0, l.lastVolume.Load()).Add(quiet)
		if !at.Before(wake) || !at.Before(deadline) {
			return true
		}
		if deadline.Before(wake) {
			wake = deadline
		}
		t := time.NewTimer(wake.Sub(at))
		select {
		case <-stop:
			t.Stop()
			return false
		case <-now:
			t.Stop()
			return true
		case <-t.C:
		}
	}
}

// close stops taking work, ends the waits and waits for what runs.
func (l *oldRootDrops) close() {
	l.mu.Lock()
	if !l.closed {
		l.closed = true
		if l.stop != nil {
			close(l.stop)
		}
	}
	l.mu.Unlock()
	l.wg.Wait()
}
