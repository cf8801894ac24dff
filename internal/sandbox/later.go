package sandbox

import "sync"

// laterWork counts the work calls leave running after they answer (a
// rolled-back sandbox's old root being dropped), so that WaitSettled can
// wait for it before the pool is unmounted.
type laterWork struct {
	mu     sync.Mutex
	wg     sync.WaitGroup
	closed bool
}

// run runs fn in the background; once the host is closing, before
// returning instead.
func (l *laterWork) run(fn func()) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		fn()
		return
	}
	l.wg.Add(1)
	l.mu.Unlock()
	go func() {
		defer l.wg.Done()
		fn()
	}()
}

// close stops taking background work and waits for what runs.
func (l *laterWork) close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.wg.Wait()
}
