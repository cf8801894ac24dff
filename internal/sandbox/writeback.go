package sandbox

import (
	"context"
	"sync"

	"github.com/warrenhq/warren/internal/runtime"
)

// writeBackTickets remembers, per sandbox, the write-back that began after
// its last command ended (a groupSync ticket), while no command has
// started since. A turn taken then is served by that write-back, under way or
// done, instead of starting its own: the command's writes are written
// back while its answer travels to the client and the agent decides.
type writeBackTickets struct {
	mu      sync.Mutex
	tickets map[string]uint64
	wg      sync.WaitGroup // write-backs under way, until WaitSettled
	closed  bool           // WaitSettled has begun: no more write-backs
}

// CommandStarted forgets sandbox id's quiet write-back: the command may
// write after it began.
func (h *Host) CommandStarted(id string) { h.forgetWriteBack(id) }

func (h *Host) forgetWriteBack(id string) {
	h.writeBacks.mu.Lock()
	delete(h.writeBacks.tickets, id)
	h.writeBacks.mu.Unlock()
}

// CommandEnded starts writing back what sandbox id's command wrote, in the
// background, for the turn snapshot expected to follow (see Snapshot). It
// shares the write-back with every other sandbox's (one syncfs of the
// pool at a time). Only for sandboxes that take turns: a write-back per
// command costs a commit.
func (h *Host) CommandEnded(id string) {
	ticket := h.syncs.next()
	h.writeBacks.mu.Lock()
	if h.writeBacks.tickets == nil {
		h.writeBacks.tickets = map[string]uint64{}
	}
	if h.writeBacks.closed {
		h.writeBacks.mu.Unlock()
		return
	}
	h.writeBacks.tickets[id] = ticket
	h.writeBacks.wg.Add(1)
	h.writeBacks.mu.Unlock()
	go func() {
		defer h.writeBacks.wg.Done()
		if err := h.syncVolumeFrom(ticket, sandboxKey(id)); err != nil {
			h.Log.Debug("write back after command", "sandbox", id, "err", err)
		}
	}()
}

// writeBackBeforeSnapshot writes back sandbox id's dirty data before a
// snapshot freezes it, so that the freeze does not (the snapshot would
// write it back itself, frozen). The write-back begun when its last
// command ended serves, under way or done, if no command started since and
// the sandbox's processes have left nothing unwritten since (its cgroup's
// dirty page cache is empty once that write-back is over); otherwise, or
// where the runtime cannot tell, a write-back beginning now does.
func (h *Host) writeBackBeforeSnapshot(ctx context.Context, id string) error {
	key := sandboxKey(id)
	h.writeBacks.mu.Lock()
	ticket, quiet := h.writeBacks.tickets[id]
	h.writeBacks.mu.Unlock()
	dr, canTell := h.Runtime.(runtime.DirtyReader)
	if !quiet || !canTell {
		return h.syncVolume(key)
	}
	if err := h.syncVolumeFrom(ticket, key); err != nil {
		return err
	}
	if n, err := dr.DirtyBytes(ctx, id); err != nil || n > 0 {
		return h.syncVolume(key)
	}
	return nil
}
