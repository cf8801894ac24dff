package btrfs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/storage"
)

// Delete implements storage.Storage. It is one ioctl: the kernel drops the
// subvolume at once and reclaims its extents in the background, whatever
// the files inside (read-only, owned by anyone). Root may destroy a
// read-only subvolume as it is; should a kernel refuse, the flag is cleared
// and the delete tried again.
func (v *volumes) Delete(ctx context.Context, key storage.Key) error {
	if err := key.Validate(); err != nil {
		return err
	}
	dir, err := v.openKindDir(key.Kind)
	if err != nil {
		return err
	}
	defer dir.Close()
	if err := v.checkVolumeAt(dir, key); err != nil {
		return err
	}
	if err := v.destroyAt(dir, key.Name); err != nil {
		return fmt.Errorf("delete %s: %w", key, errnoKind(err))
	}
	v.cleaner.soon(v.root)
	return nil
}

// checkVolumeAt checks that key, in its kind's open directory dir, is a
// subvolume: through the directory already held, one syscall (the delete
// itself is only a few tens of microseconds).
func (v *volumes) checkVolumeAt(dir *os.File, key storage.Key) error {
	var st unix.Stat_t
	err := unix.Fstatat(int(dir.Fd()), key.Name, &st, unix.AT_SYMLINK_NOFOLLOW)
	switch {
	case errors.Is(err, unix.ENOENT):
		return fmt.Errorf("delete %s: %w", key, errdefs.ErrNotFound)
	case err != nil:
		return fmt.Errorf("delete %s: %w", key, errnoKind(err))
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return fmt.Errorf("delete %s: %s is not a volume: %w", key, v.Path(key), errdefs.ErrNotFound)
	case st.Ino != firstFreeObjectID:
		return fmt.Errorf("delete %s: %s is a plain directory, not a btrfs subvolume; remove it by hand: %w", key, v.Path(key), errdefs.ErrConflict)
	}
	return nil
}

// destroyAt drops the subvolume name in the open directory dir.
func (v *volumes) destroyAt(dir *os.File, name string) error {
	path := filepath.Join(dir.Name(), name)
	err := snapDestroy(int(dir.Fd()), name)
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EROFS) {
		// Kernels that refuse to drop a read-only subvolume even for root:
		// make it writable and try again.
		if err = clearReadOnly(path); err == nil {
			err = snapDestroy(int(dir.Fd()), name)
		}
	}
	if errors.Is(err, unix.ENOTEMPTY) {
		// Code inside a sandbox may create subvolumes of its own (no
		// privilege needed); the kernel will not drop a subvolume that
		// holds others, so drop those first. This is the rare, slow path.
		if err = v.deleteNested(path); err == nil {
			err = snapDestroy(int(dir.Fd()), name)
		}
	}
	return err
}

// deleteNested destroys every subvolume below top (not top itself), deepest
// first. top and the nested subvolumes are made writable for the duration,
// since removing a directory entry needs a writable parent.
func (v *volumes) deleteNested(top string) error {
	var nested []string
	err := filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() || p == top {
			return nil
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		if st.Ino == firstFreeObjectID {
			nested = append(nested, p)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("look for nested subvolumes in %s: %w", top, err)
	}
	// Deepest first: a nested subvolume may itself hold subvolumes.
	slices.SortFunc(nested, func(a, b string) int { return len(b) - len(a) })
	if err := clearReadOnly(top); err != nil {
		return err
	}
	for _, p := range nested {
		if err := clearReadOnly(p); err != nil {
			return err
		}
	}
	for _, p := range nested {
		parent, err := os.OpenFile(filepath.Dir(p), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		err = snapDestroy(int(parent.Fd()), filepath.Base(p))
		parent.Close()
		if err != nil {
			return fmt.Errorf("delete nested subvolume %s: %w", p, err)
		}
		v.log.Info("deleted a nested subvolume", "path", p)
	}
	return nil
}

// clearReadOnly drops the read-only flag of the subvolume holding p
// (SUBVOL_GETFLAGS answers for the subvolume of any file in it).
func clearReadOnly(p string) error {
	f, err := os.OpenFile(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return err
	}
	if st.Ino != firstFreeObjectID {
		return nil // a plain directory: the flag belongs to its subvolume, handled elsewhere
	}
	return setReadOnly(int(f.Fd()), false)
}
