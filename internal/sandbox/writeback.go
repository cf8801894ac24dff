package sandbox

import "sync"

// quietWrites remembers, per sandbox, the write-back that began after its
// last command ended (a groupSync ticket), while no command has started
// since. A turn taken then is served by that write-back, under way or
// done, instead of starting its own: the command's writes are written
// back while its answer travels to the client and the agent decides.
type quietWrites struct {
	mu      sync.Mutex
	tickets map[string]uint64
}

// CommandStarted forgets sandbox id's quiet write-back: the command may
// write after it began.
func (h *Host) CommandStarted(id string) {
	h.quiet.mu.Lock()
	delete(h.quiet.tickets, id)
	h.quiet.mu.Unlock()
}

// CommandEnded starts writing back what sandbox id's command wrote, in the
// background, for the turn snapshot expected to follow (see Snapshot). It
// shares the write-back with every other sandbox's (one syncfs of the
// pool at a time). Only for sandboxes that take turns: a write-back per
// command costs a commit.
func (h *Host) CommandEnded(id string) {
	ticket := h.syncs.next()
	h.quiet.mu.Lock()
	if h.quiet.tickets == nil {
		h.quiet.tickets = map[string]uint64{}
	}
	h.quiet.tickets[id] = ticket
	h.quiet.mu.Unlock()
	go func() {
		if err := h.syncVolumeFrom(ticket, sandboxKey(id)); err != nil {
			h.Log.Debug("write back after command", "sandbox", id, "err", err)
		}
	}()
}

// writeBackTicket is the write-back a snapshot of sandbox id needs: the
// one begun since its last command ended if none started since, else one
// beginning from now.
func (h *Host) writeBackTicket(id string) uint64 {
	h.quiet.mu.Lock()
	ticket, ok := h.quiet.tickets[id]
	h.quiet.mu.Unlock()
	if ok {
		return ticket
	}
	return h.syncs.next()
}
