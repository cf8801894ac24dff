// Package startgate bounds how many sandbox starts run at once.
//
// A start (the runtime's start of the init and the agent, until the agent
// answers) is almost all CPU: ~30 ms of it on a native sandbox, ~200 on
// gVisor. Fifty creates at once on two cores then all progress together
// and all finish near the end of the ~850 ms of work, so the median create
// waits as long as the slowest. With at most a few starts running and the
// rest waiting in arrival order, the first finish early and the median
// finishes after about half the work: the same throughput, half the median
// latency. The gate is that queue.
//
// Starts wait in two classes: Normal (a user's create, fork, rollback or
// boot) and Background (a warm pool's refill). A Background start gets a
// slot only when no Normal one waits, so a refill never delays a create
// that a client is waiting for; under a steady stream of creates a refill
// waits until it ends, which is what a pool is for (it fills the gaps).
package startgate

import (
	"container/list"
	"context"
	"fmt"
	"sync"
	"time"
)

// Priority is the class a start waits in.
type Priority int

const (
	// Normal: a start a client is waiting for.
	Normal Priority = iota
	// Background: a warm pool's refill; it waits behind every Normal
	// start.
	Background
	classes
)

type priorityKey struct{}

// WithPriority returns ctx with p: the starts made under it wait in p's
// class (the default is Normal).
func WithPriority(ctx context.Context, p Priority) context.Context {
	return context.WithValue(ctx, priorityKey{}, p)
}

// PriorityOf is the class ctx's starts wait in.
func PriorityOf(ctx context.Context) Priority {
	if p, ok := ctx.Value(priorityKey{}).(Priority); ok && p >= Normal && p < classes {
		return p
	}
	return Normal
}

// Gate admits at most its limit of starts at once; the others wait, first
// come first served within a class. A nil *Gate, or one of limit 0,
// admits everything at once.
type Gate struct {
	limit int
	now   func() time.Time

	mu      sync.Mutex
	running int
	queues  [classes]list.List // of *waiter, oldest first
	stats   Stats
}

// waiter is one start waiting for a slot. ready is closed when the slot
// is handed to it (granted set under the gate's lock).
type waiter struct {
	ready   chan struct{}
	granted bool
	class   Priority
	elem    *list.Element
}

// Stats are the gate's figures for the metrics.
type Stats struct {
	Limit   int // 0: unbounded
	Running int // starts holding a slot
	Waiting int // starts waiting for one
	// Admitted counts the starts that got a slot; Queued those of them
	// that had to wait for it first, and WaitSeconds their waits' sum.
	Admitted    uint64
	Queued      uint64
	WaitSeconds float64
	// Cancelled counts the starts whose context ended while they waited.
	Cancelled uint64
}

// New returns a gate that lets limit starts run at once (0: no limit).
func New(limit int) *Gate {
	return &Gate{limit: max(limit, 0), now: time.Now}
}

// Acquire waits for a slot in the class ctx names (WithPriority) and
// returns its release, which must be called once the start is over (it is
// safe to call more than once). If ctx ends first, Acquire leaves the
// queue and returns ctx's error: no slot is held then.
func (g *Gate) Acquire(ctx context.Context) (release func(), err error) {
	if g == nil || g.limit == 0 {
		return func() {}, nil
	}
	g.mu.Lock()
	// A free slot means nobody waits (a release hands its slot straight
	// to the next waiter), so taking it jumps no queue.
	if g.running < g.limit {
		g.running++
		g.stats.Admitted++
		g.mu.Unlock()
		return g.releaseOnce(), nil
	}
	w := &waiter{ready: make(chan struct{}), class: PriorityOf(ctx)}
	w.elem = g.queues[w.class].PushBack(w)
	began := g.now()
	g.mu.Unlock()

	select {
	case <-w.ready:
		g.mu.Lock()
		g.stats.Queued++
		g.stats.WaitSeconds += g.now().Sub(began).Seconds()
		g.mu.Unlock()
		return g.releaseOnce(), nil
	case <-ctx.Done():
	}
	g.mu.Lock()
	g.stats.Cancelled++
	if w.granted {
		// The slot was handed over as ctx ended: pass it on.
		g.stats.Admitted--
		g.mu.Unlock()
		g.release()
	} else {
		g.queues[w.class].Remove(w.elem)
		g.mu.Unlock()
	}
	return nil, fmt.Errorf("waiting to start: %w", context.Cause(ctx))
}

// releaseOnce is a release that frees the slot the first time it is called.
func (g *Gate) releaseOnce() func() {
	var once sync.Once
	return func() { once.Do(g.release) }
}

// release hands the slot to the oldest waiter of the highest class, or
// frees it when nobody waits.
func (g *Gate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for c := range g.queues {
		q := &g.queues[c]
		if front := q.Front(); front != nil {
			w := q.Remove(front).(*waiter)
			w.granted = true
			g.stats.Admitted++
			close(w.ready)
			return
		}
	}
	g.running--
}

// Stats returns the gate's figures now.
func (g *Gate) Stats() Stats {
	if g == nil {
		return Stats{}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.stats
	s.Limit, s.Running = g.limit, g.running
	for c := range g.queues {
		s.Waiting += g.queues[c].Len()
	}
	return s
}
