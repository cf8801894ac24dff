package sandbox

import "sync"

// groupSync runs a filesystem-wide write-back (syncfs) for many callers at
// once: a caller is served by the first sync that starts after it asked,
// so a burst of snapshots (32 forks taking a turn together) costs a couple
// of syncs instead of one each, back to back.
type groupSync struct {
	mu       sync.Mutex
	started  uint64        // syncs begun
	finished uint64        // syncs done
	running  bool          // a sync is under way
	done     chan struct{} // closed when the running sync ends
	err      error         // the last finished sync's error
}

// do returns once a run of fn that began after the call has finished.
func (g *groupSync) do(fn func() error) error { return g.doFrom(g.next(), fn) }

// next is the ticket of the first run to begin from now on.
func (g *groupSync) next() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.started + 1
}

// doFrom returns once run number ticket (or a later one) of fn has
// finished: with a ticket taken earlier (next), a run already under way
// since then serves the caller.
func (g *groupSync) doFrom(ticket uint64, fn func() error) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	target := ticket
	for g.finished < target {
		if g.running {
			done := g.done
			g.mu.Unlock()
			<-done
			g.mu.Lock()
			continue
		}
		g.started++
		g.running = true
		g.done = make(chan struct{})
		g.mu.Unlock()
		err := fn()
		g.mu.Lock()
		g.finished++
		g.running = false
		g.err = err
		close(g.done)
	}
	return g.err
}
