package sandbox

import (
	"sync"
	"sync/atomic"
	"time"
)

// Pacing of the work left for later.
const (
	// poolQuiet is how long the pool must go without a new volume (a
	// turn, a fork, a rollback's copy) before a rollback's old root is
	// dropped: btrfs's cleaner then spends a second or two on it, and every
	// snapshot meanwhile waits on its commits.
	poolQuiet = 2 * time.Second
	// quietWaitMax bounds that wait on a pool that is never quiet.
	quietWaitMax = time.Minute
)

// laterWork runs the work calls leave after they answer (a rolled-back
// sandbox's old root being dropped) and counts it, so that WaitSettled can
// wait for it before the pool is unmounted.
type laterWork struct {
	mu     sync.Mutex
	wg     sync.WaitGroup
	closed bool
	stop   chan struct{} // closed by close: waits for quiet end
	// quiet and waitMax override poolQuiet and quietWaitMax (tests).
	quiet, waitMax time.Duration
	// lastVolume is when the newest volume was made (UnixNano).
	lastVolume atomic.Int64
}

// volumeMade notes that a volume was made now.
func (l *laterWork) volumeMade() { l.lastVolume.Store(time.Now().UnixNano()) }

// whenQuiet runs fn in the background once the pool has gone poolQuiet
// without a new volume, or quietWaitMax has passed. fn is not run if the
// host closes first (start-up's reconcile removes what it would have).
func (l *laterWork) whenQuiet(fn func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	if l.stop == nil {
		l.stop = make(chan struct{})
	}
	stop := l.stop
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		waitMax := quietWaitMax
		if l.waitMax > 0 {
			waitMax = l.waitMax
		}
		if l.waitQuiet(stop, time.Now().Add(waitMax)) {
			fn()
		}
	}()
}

// waitQuiet waits for the quiet or the deadline; false if stop closed.
func (l *laterWork) waitQuiet(stop <-chan struct{}, deadline time.Time) bool {
	quiet := poolQuiet
	if l.quiet > 0 {
		quiet = l.quiet
	}
	for {
		now := time.Now()
		quietAt := time.Unix(0, l.lastVolume.Load()).Add(quiet)
		if !now.Before(quietAt) || !now.Before(deadline) {
			return true
		}
		wake := quietAt
		if deadline.Before(wake) {
			wake = deadline
		}
		t := time.NewTimer(wake.Sub(now))
		select {
		case <-stop:
			t.Stop()
			return false
		case <-t.C:
		}
	}
}

// close stops taking work, ends the waits and waits for what runs.
func (l *laterWork) close() {
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
