package sandbox

import (
	"context"
	"sync"

	"github.com/warrenhq/warren/internal/dirsize"
)

// VolumeDir is where a snapshot's volume (or, when live, a sandbox's live
// tree) is on the host, once written: what a merge compares and writes.
func (s *snapshots) VolumeDir(ctx context.Context, id string, live bool) (string, error) {
	if live {
		if err := s.pool.unsettled.sandbox(ctx, id); err != nil {
			return "", err
		}
		return s.pool.st.Path(sandboxKey(id)), nil
	}
	if err := s.pool.unsettled.snapshot(ctx, id); err != nil {
		return "", err
	}
	return s.pool.st.Path(snapshotKey(id)), nil
}

// snapshotBytes caches the bytes of files each snapshot holds: a snapshot
// never changes, and a fork summary asks for its fork point's on every call.
var snapshotBytes sync.Map // snapshot id → int64

// SnapshotFileBytes adds up the sizes of the regular files in a snapshot
// (a fork's divergence is weighed against it).
func (s *snapshots) SnapshotFileBytes(ctx context.Context, snapID string) (int64, error) {
	if n, ok := snapshotBytes.Load(snapID); ok {
		return n.(int64), nil
	}
	dir, err := s.VolumeDir(ctx, snapID, false)
	if err != nil {
		return 0, err
	}
	n, err := dirsize.Of(dir)
	if err != nil {
		return 0, err
	}
	snapshotBytes.Store(snapID, n)
	return n, nil
}
