package sandbox

import (
	"context"
	"fmt"
	"sync"

	"github.com/warrenhq/warren/internal/errdefs"
)

// unsettledSnapshots tracks the snapshots being written: from the start
// of the snapshot call until it returns. A turn's snapshot is answered as
// soon as its content is fixed (see Host.Snapshot), while btrfs still
// writes out the commit that holds it; until then its volume cannot be
// opened (its name resolves to nothing), and its sandbox's volume is still
// the call's source. Everything that reads the snapshot or replaces or removes
// the sandbox's volume waits for it here first.
type unsettledSnapshots struct {
	mu        sync.Mutex
	bySnap    map[string]*settle
	bySandbox map[string]*settle
	// wg counts the calls under way until WaitSettled closes it; later
	// ones (a request that outlived the server's shutdown) go uncounted.
	wg     sync.WaitGroup
	closed bool
}

type settle struct {
	sandbox, snap string
	done          chan struct{}
	err           error // the snapshot call's error; read after done
	counted       bool  // in wg
}

// begin registers a snapshot of sandbox about to be written.
func (s *unsettledSnapshots) begin(sandbox, snap string) *settle {
	st := &settle{sandbox: sandbox, snap: snap, done: make(chan struct{})}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bySnap == nil {
		s.bySnap = map[string]*settle{}
		s.bySandbox = map[string]*settle{}
	}
	s.bySnap[snap] = st
	s.bySandbox[sandbox] = st
	if !s.closed {
		st.counted = true
		s.wg.Add(1)
	}
	return st
}

// end records the snapshot call's outcome and releases its waiters;
// finished follows once nothing more is done for it.
func (s *unsettledSnapshots) end(st *settle, err error) {
	s.mu.Lock()
	if s.bySnap[st.snap] == st {
		delete(s.bySnap, st.snap)
	}
	if s.bySandbox[st.sandbox] == st {
		delete(s.bySandbox, st.sandbox)
	}
	s.mu.Unlock()
	st.err = err
	close(st.done)
}

// finished marks st's background work over (WaitSettled).
func (s *unsettledSnapshots) finished(st *settle) {
	if st.counted {
		s.wg.Done()
	}
}

// close stops counting new calls and waits for those counted.
func (s *unsettledSnapshots) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.wg.Wait()
}

// wait returns once st's call has ended (at once for nil), or ctx's error.
func (s *unsettledSnapshots) wait(ctx context.Context, st *settle) error {
	if st == nil {
		return nil
	}
	select {
	case <-st.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// lookup finds the call writing snapshot key, or (bySandbox) a snapshot
// of sandbox key.
func (s *unsettledSnapshots) lookup(key string, bySandbox bool) *settle {
	s.mu.Lock()
	defer s.mu.Unlock()
	if bySandbox {
		return s.bySandbox[key]
	}
	return s.bySnap[key]
}

// snapshot waits until snapshot id is written, if it is being written.
// A snapshot whose commit failed is not found.
func (s *unsettledSnapshots) snapshot(ctx context.Context, id string) error {
	return s.written(ctx, s.lookup(id, false))
}

// written waits for st's call (if any) and reports a failed one as not
// found.
func (s *unsettledSnapshots) written(ctx context.Context, st *settle) error {
	if err := s.wait(ctx, st); err != nil {
		return err
	}
	if st != nil && st.err != nil {
		return fmt.Errorf("snapshot %s was not written: %w: %w", st.snap, st.err, errdefs.ErrNotFound)
	}
	return nil
}

// sandbox waits until no snapshot of sandbox id is being written. Its
// outcome is the snapshot's business, not the caller's.
func (s *unsettledSnapshots) sandbox(ctx context.Context, id string) error {
	return s.wait(ctx, s.lookup(id, true))
}
