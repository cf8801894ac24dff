// Package keylock holds one mutex per key (a sandbox id), made on first use
// and dropped when nobody holds or waits for it, so that operations on one
// sandbox are serialised without a global lock and without a map that grows
// with every sandbox ever seen.
package keylock

import (
	"context"
	"sync"
)

// Locks is a set of read-write mutexes by key: Lock is exclusive, RLock
// shared. The zero value is ready to use.
type Locks struct {
	mu sync.Mutex
	m  map[string]*entry
}

type entry struct {
	sync.RWMutex
	refs int
}

// Lock locks key's mutex for itself alone and returns its unlock.
func (l *Locks) Lock(key string) (unlock func()) {
	e := l.enter(key)
	e.Lock()
	return l.unlockFunc(key, e, e.Unlock)
}

// RLock locks key's mutex shared with other readers and returns its
// unlock.
func (l *Locks) RLock(key string) (unlock func()) {
	e := l.enter(key)
	e.RLock()
	return l.unlockFunc(key, e, e.RUnlock)
}

// enter counts one more holder or waiter of key's mutex.
func (l *Locks) enter(key string) *entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = make(map[string]*entry)
	}
	e := l.m[key]
	if e == nil {
		e = &entry{}
		l.m[key] = e
	}
	e.refs++
	return e
}

func (l *Locks) unlockFunc(key string, e *entry, release func()) func() {
	return func() {
		release()
		l.mu.Lock()
		e.refs--
		if e.refs == 0 {
			delete(l.m, key)
		}
		l.mu.Unlock()
	}
}

// Busy reports whether anyone holds or waits for key's mutex.
func (l *Locks) Busy(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.m[key] != nil
}

// TryLock locks key's mutex if nobody holds or waits for it, and returns
// its unlock; ok is false (and unlock nil) when the key is busy. It never
// waits.
func (l *Locks) TryLock(key string) (unlock func(), ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = make(map[string]*entry)
	}
	if l.m[key] != nil {
		return nil, false
	}
	e := &entry{refs: 1}
	e.Lock() // new, so nobody else can hold it
	l.m[key] = e
	return l.unlockFunc(key, e, e.Unlock), true
}

// LockContext is Lock that gives up when ctx ends first. A waiter that
// gave up still takes the lock when its turn comes, and at once releases
// it: a mutex cannot be left mid-wait.
func (l *Locks) LockContext(ctx context.Context, key string) (unlock func(), err error) {
	if unlock, ok := l.TryLock(key); ok {
		return unlock, nil
	}
	got := make(chan func(), 1)
	go func() { got <- l.Lock(key) }()
	select {
	case unlock := <-got:
		return unlock, nil
	case <-ctx.Done():
		go func() { (<-got)() }()
		return nil, ctx.Err()
	}
}
