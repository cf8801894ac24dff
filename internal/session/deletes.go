package session

// The background deletes of snapshot volumes, spaced out (the archiver
// queues them).

import (
	"context"
	"time"
)

// deleteVolumeLater queues a snapshot volume for deletion. Deletes are
// cheap to issue but btrfs cleans up in the background, and a burst of them
// stalls later snapshots; the queue spaces them out.
func (a *archiver) deleteVolumeLater(snapID string) {
	select {
	case a.deletes <- snapID:
	default:
		// The queue is full: delete now rather than leak.
		if err := a.host.DeleteSnapshot(context.Background(), snapID); err != nil {
			a.log.Warn("delete snapshot volume", "snapshot", snapID, "err", err)
		}
	}
}

// deleteInterval spaces background snapshot deletes.
const deleteInterval = 20 * time.Millisecond

// runDeletes deletes queued snapshot volumes until ctx ends.
func (a *archiver) runDeletes(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case id := <-a.deletes:
			if err := a.host.DeleteSnapshot(context.WithoutCancel(ctx), id); err != nil {
				a.log.Warn("delete snapshot volume", "snapshot", id, "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(deleteInterval):
			}
		}
	}
}
