package session

import (
	"context"
	"time"

	"github.com/warrenhq/warren/internal/store"
)

// lockSandbox serialises the operations that change a sandbox's tree or
// life (snapshot, rollback, delete) and returns the unlock.
func (m *Manager) lockSandbox(id string) func() { return m.sbLocks.Lock(id) }

// deleteVolumeLater queues a snapshot volume for deletion. Deletes are
// cheap to issue but btrfs cleans up in the background, and a burst of them
// stalls later snapshots; the queue spaces them out.
func (m *Manager) deleteVolumeLater(snapID string) {
	select {
	case m.deletes <- snapID:
	default:
		// The queue is full: delete now rather than leak.
		if err := m.host.DeleteSnapshot(context.Background(), snapID); err != nil {
			m.log.Warn("delete snapshot volume", "snapshot", snapID, "err", err)
		}
	}
}

// deleteInterval spaces background snapshot deletes.
const deleteInterval = 20 * time.Millisecond

// runDeletes deletes queued snapshot volumes until ctx ends.
func (m *Manager) runDeletes(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case id := <-m.deletes:
			if err := m.host.DeleteSnapshot(context.WithoutCancel(ctx), id); err != nil {
				m.log.Warn("delete snapshot volume", "snapshot", id, "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(deleteInterval):
			}
		}
	}
}

// pruneTurns tombstones a sandbox's oldest turn snapshots (in the pool or
// archived) beyond the configured cap. Named snapshots, implicit ones,
// turns that have forks and anchors of archived turns are kept.
func (m *Manager) pruneTurns(ctx context.Context, sandboxID string) {
	if m.cfg.MaxTurns <= 0 {
		return
	}
	turns, err := m.store.ListSnapshots(ctx, store.SnapshotFilter{SandboxID: sandboxID,
		Kinds: []store.SnapshotKind{KindTurn}, States: usableStates})
	if err != nil {
		m.log.Warn("list turns to prune", "sandbox", sandboxID, "err", err)
		return
	}
	excess := len(turns) - m.cfg.MaxTurns
	for _, t := range turns { // oldest first
		if excess <= 0 {
			return
		}
		if n, err := m.store.CountForksOf(ctx, t.ID); err != nil || n > 0 {
			continue
		}
		if err := m.dropSnapshot(ctx, t.ID); err != nil {
			continue
		}
		excess--
	}
}
