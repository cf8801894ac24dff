package btrfs

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/warrenhq/warren/internal/storage"
)

// snapshotter makes snapshots, each charged to its quota group, and tells
// when one is taken.
type snapshotter struct {
	vols   *volumes
	groups snapshotGroups
	// highestSubvol is the highest subvolume id seen made since the pool was
	// opened: new ids only grow, so watchSnapshot searches above it.
	highestSubvol atomic.Uint64
}

// snapshotGroups is what a snapshot needs of the quota groups: the qgroup
// it joins (quota_groups.go).
type snapshotGroups interface {
	snapshotGroup(group string, reclaim bool) (qgroup uint64, undo func(), err error)
}

// Snapshot implements storage.Storage.
func (sn *snapshotter) Snapshot(ctx context.Context, parent, key storage.Key, opts storage.SnapshotOptions) (string, error) {
	if err := parent.Validate(); err != nil {
		return "", err
	}
	if err := key.Validate(); err != nil {
		return "", err
	}
	src, err := sn.vols.openSubvol(parent)
	if err != nil {
		return "", fmt.Errorf("snapshot %s: source: %w", parent, err)
	}
	defer src.Close()
	dir, err := sn.vols.openKindDir(key.Kind)
	if err != nil {
		return "", err
	}
	defer dir.Close()
	qgroup, undoGroup, err := sn.groups.snapshotGroup(opts.Group, !opts.ReadOnly)
	if err != nil {
		return "", fmt.Errorf("snapshot %s as %s: %w", parent, key, err)
	}
	var stopWatch func()
	if opts.Taken != nil {
		stopWatch = sn.watchSnapshot(int(src.Fd()), int(dir.Fd()), key.Name, opts.Taken)
	}
	err = snapCreateInGroup(int(src.Fd()), int(dir.Fd()), key.Name, opts.ReadOnly, qgroup)
	if stopWatch != nil {
		stopWatch()
	}
	if err != nil {
		undoGroup()
		return "", fmt.Errorf("snapshot %s as %s: %w", parent, key, errnoKind(err))
	}
	return sn.vols.Path(key), nil
}

// watchSnapshot starts watching for the moment the snapshot name, about to
// be made of srcFd inside dirFd, has its content fixed (taken.go), and
// calls taken then. The returned stop ends the watch and waits for it, so
// taken has returned (or will never be called) once stop has.
func (sn *snapshotter) watchSnapshot(srcFd, dirFd int, name string, taken func()) (stop func()) {
	srcID, err := subvolID(srcFd)
	if err != nil {
		return func() {}
	}
	parentTree, err := subvolID(dirFd)
	if err != nil {
		return func() {}
	}
	dirIno, err := dirInode(dirFd)
	if err != nil {
		return func() {}
	}
	w := &rootRefWatch{fd: dirFd, parentTree: parentTree, dirIno: dirIno, floor: max(srcID, sn.highestSubvol.Load()), name: name}
	done := make(chan struct{})
	stopped := watchTaken(w, taken, done)
	return func() {
		close(done)
		<-stopped
		// The next watch searches above this one's subvolume (found now
		// if the ioctl returned before the watch saw it).
		if w.id == 0 {
			w.id, _, _ = w.found()
		}
		raiseTo(&sn.highestSubvol, w.id)
	}
}
