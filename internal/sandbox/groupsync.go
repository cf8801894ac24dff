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
func (g *groupSync) do(fn func() error) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	target := g.started + 1
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
