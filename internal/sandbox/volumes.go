package sandbox

import (
	"context"
	"sync"

	"github.com/warrenhq/warren/internal/storage"
)

// volumes is the pool every job reaches the storage through, with what
// they must agree on about it: the snapshots still being written (which
// whoever reads a snapshot or replaces a sandbox's volume waits for), the
// one freeze-and-snapshot at a time, and the rollbacks' old roots waiting
// for a quiet pool (which every new volume puts off).
type volumes struct {
	st        storage.Storage
	unsettled unsettledSnapshots
	oldRoots  oldRootDrops
	// snapMu lets one snapshot at a time freeze its sandbox: btrfs commits
	// them one at a time anyway, and a freeze waiting for another's commit
	// would only stay frozen longer.
	snapMu sync.Mutex
}

func sandboxKey(id string) storage.Key  { return storage.Key{Kind: storage.KindSandbox, Name: id} }
func snapshotKey(id string) storage.Key { return storage.Key{Kind: storage.KindSnapshot, Name: id} }

// snapshotVolume is Storage.Snapshot, noted as a new volume in the pool
// (which puts off dropping a rollback's old root, see oldRootDrops).
func (v *volumes) snapshotVolume(ctx context.Context, parent, key storage.Key, opts storage.SnapshotOptions) (string, error) {
	v.oldRoots.volumeMade()
	return v.st.Snapshot(ctx, parent, key, opts)
}
