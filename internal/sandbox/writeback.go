package sandbox

import (
	"context"
	"log/slog"
	"os"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/runtime"
	"github.com/warrenhq/warren/internal/storage"
)

// volumePaths says where a volume is on the host.
type volumePaths interface {
	Path(key storage.Key) string
}

// writeBackTickets writes back sandboxes' dirty data before their
// snapshots, one filesystem-wide write-back serving many (syncs). It
// remembers, per sandbox, the write-back that began after its last command
// ended (a groupSync ticket), while no command has started since. A turn
// taken then is served by that write-back, under way or done, instead of
// starting its own: the command's writes are written back while its answer
// travels to the client and the agent decides.
type writeBackTickets struct {
	paths volumePaths
	// dirty tells whether a sandbox has left data unwritten (nil: the
	// runtime cannot tell).
	dirty runtime.DirtyReader
	log   *slog.Logger
	syncs groupSync

	mu      sync.Mutex
	tickets map[string]uint64
	wg      sync.WaitGroup // write-backs under way, until WaitSettled
	closed  bool           // WaitSettled has begun: no more write-backs
}

// CommandStarted forgets sandbox id's quiet write-back: the command may
// write after it began.
func (w *writeBackTickets) CommandStarted(id string) { w.forgetWriteBack(id) }

func (w *writeBackTickets) forgetWriteBack(id string) {
	w.mu.Lock()
	delete(w.tickets, id)
	w.mu.Unlock()
}

// CommandEnded starts writing back what sandbox id's command wrote, in the
// background, for the turn snapshot expected to follow (see Snapshot). It
// shares the write-back with every other sandbox's (one syncfs of the
// pool at a time). Only for sandboxes that take turns: a write-back per
// command costs a commit.
func (w *writeBackTickets) CommandEnded(id string) {
	ticket := w.syncs.next()
	w.mu.Lock()
	if w.tickets == nil {
		w.tickets = map[string]uint64{}
	}
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.tickets[id] = ticket
	w.wg.Add(1)
	w.mu.Unlock()
	go func() {
		defer w.wg.Done()
		if err := w.syncVolumeFrom(ticket, sandboxKey(id)); err != nil {
			w.log.Debug("write back after command", "sandbox", id, "err", err)
		}
	}()
}

// close lets no more write-backs begin and waits for those under way.
func (w *writeBackTickets) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.wg.Wait()
}

// writeBackBeforeSnapshot writes back sandbox id's dirty data before a
// snapshot freezes it, so that the freeze does not (the snapshot would
// write it back itself, frozen). The write-back begun when its last
// command ended serves, under way or done, if no command started since and
// the sandbox's processes have left nothing unwritten since (its cgroup's
// dirty page cache is empty once that write-back is over); otherwise, or
// where the runtime cannot tell, a write-back beginning now does.
func (w *writeBackTickets) writeBackBeforeSnapshot(ctx context.Context, id string) error {
	key := sandboxKey(id)
	w.mu.Lock()
	ticket, quiet := w.tickets[id]
	w.mu.Unlock()
	if !quiet || w.dirty == nil {
		return w.syncVolume(key)
	}
	if err := w.syncVolumeFrom(ticket, key); err != nil {
		return err
	}
	if n, err := w.dirty.DirtyBytes(ctx, id); err != nil || n > 0 {
		return w.syncVolume(key)
	}
	return nil
}

// syncVolume writes back a volume's dirty data: syncfs on the filesystem
// holding it, shared with the other snapshots waiting for one (every volume
// is in the one pool).
func (w *writeBackTickets) syncVolume(key storage.Key) error {
	return w.syncVolumeFrom(w.syncs.next(), key)
}

// syncVolumeFrom is syncVolume served by write-back number ticket or a
// later one (groupSync.doFrom).
func (w *writeBackTickets) syncVolumeFrom(ticket uint64, key storage.Key) error {
	f, err := os.Open(w.paths.Path(key))
	if err != nil {
		return err
	}
	defer f.Close()
	return w.syncs.doFrom(ticket, func() error { return unix.Syncfs(int(f.Fd())) })
}
