package btrfs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
	"github.com/warrenhq/warren/internal/storage"
)

// droppingDir, beside the kind directories, holds volumes on their way out
// (DeleteAside): each in a directory of its own, <nonce>/vol.
//
// Why: BTRFS_IOC_SNAP_DESTROY holds the lock of the directory the volume
// is in (its i_rwsem) for the whole delete, and the delete evicts every
// inode of the volume the kernel has cached: 0.3–1 s for a root a sandbox
// has read a 100k-file workspace through. Making a volume in that same
// directory (the next rollback's copy into scratch/, a turn into
// snapshots/) takes that lock too, and waits. Renamed first into a
// directory nobody else uses, the volume is dropped while only that
// directory is locked; the rename itself holds the kind directory for
// microseconds.
const droppingDir = ".dropping"

// droppedName is a volume's name inside its own directory of droppingDir.
const droppedName = "vol"

// DeleteAside implements storage.AsideDeleter: Delete, with the volume
// first moved out of its kind's directory.
func (v *volumes) DeleteAside(ctx context.Context, key storage.Key) error {
	if v.inPlace.Load() {
		return v.Delete(ctx, key)
	}
	if err := key.Validate(); err != nil {
		return err
	}
	kindDir, err := v.openKindDir(key.Kind)
	if err != nil {
		return err
	}
	defer kindDir.Close()
	if err := v.checkVolumeAt(kindDir, key); err != nil {
		return err
	}
	own := filepath.Join(v.root, droppingDir, ids.New(8))
	if err := os.MkdirAll(own, 0o700); err != nil {
		return fmt.Errorf("delete %s: make %s: %w", key, own, err)
	}
	defer os.Remove(own)
	dir, err := os.OpenFile(own, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	defer dir.Close()
	// RENAME_NOREPLACE: the nonce is fresh, but never drop a stranger.
	move := func() error {
		return unix.Renameat2(int(kindDir.Fd()), key.Name, int(dir.Fd()), droppedName, unix.RENAME_NOREPLACE)
	}
	err = move()
	if errors.Is(err, unix.EROFS) {
		// A read-only volume cannot move (its ".." would change): it is
		// going anyway, so make it writable first.
		if err = clearReadOnly(v.Path(key)); err == nil {
			err = move()
		}
	}
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("delete %s: %w", key, errdefs.ErrNotFound)
		}
		return fmt.Errorf("delete %s: move it to %s: %w", key, own, errnoKind(err))
	}
	if err := v.destroyAt(dir, droppedName); err != nil {
		// Left in droppingDir: the next Open's sweep retries it.
		return fmt.Errorf("delete %s (moved to %s): %w", key, own, errnoKind(err))
	}
	v.cleaner.soon(v.root)
	return nil
}

// SetDeleteInPlace makes DeleteAside a plain Delete (on) or not: the
// snapshot bench's baseline, measured in the same run.
func (v *volumes) SetDeleteInPlace(on bool) { v.inPlace.Store(on) }

// sweepDropping drops what a crash left in droppingDir (volumes moved
// there whose delete did not end), so that nothing in it outlives a start.
func (v *volumes) sweepDropping() error {
	top := filepath.Join(v.root, droppingDir)
	entries, err := os.ReadDir(top)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sweep %s: %w", top, err)
	}
	var errs []error
	for _, e := range entries {
		own := filepath.Join(top, e.Name())
		if err := v.sweepOne(own); err != nil {
			errs = append(errs, err)
			continue
		}
		v.log.Info("dropped a volume a delete left", "path", own)
	}
	return errors.Join(errs...)
}

// sweepOne drops own/vol (if there) and own.
func (v *volumes) sweepOne(own string) error {
	dir, err := os.OpenFile(own, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("sweep %s: %w", own, err)
	}
	defer dir.Close()
	var st unix.Stat_t
	switch err := unix.Fstatat(int(dir.Fd()), droppedName, &st, unix.AT_SYMLINK_NOFOLLOW); {
	case errors.Is(err, unix.ENOENT):
	case err != nil:
		return fmt.Errorf("sweep %s: %w", own, err)
	case st.Ino == firstFreeObjectID:
		if err := v.destroyAt(dir, droppedName); err != nil {
			return fmt.Errorf("sweep %s: %w", own, errnoKind(err))
		}
		v.cleaner.soon(v.root)
	}
	// Anything else in there is not warren's to guess about: RemoveAll of
	// a plain tree (never a subvolume, which rmdir refuses).
	if err := os.RemoveAll(own); err != nil {
		return fmt.Errorf("sweep %s: %w", own, err)
	}
	return nil
}
