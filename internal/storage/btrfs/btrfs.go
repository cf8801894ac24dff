// Package btrfs keeps warren's volumes as btrfs subvolumes: a snapshot is one
// ioctl that costs milliseconds whatever the size of the tree.
//
// Volumes live at <root>/<kind>/<name>; the kind directories are plain
// directories. Open finds or builds the pool (see pool.go).
package btrfs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/storage"
)

var _ storage.Storage = (*Storage)(nil)
var _ storage.Closer = (*Storage)(nil)

// Storage is a pool of btrfs subvolumes: one type per job, each over the
// volumes' layout (volumes) or the pool.
type Storage struct {
	*volumes     // create, stat, list, exchange, delete: one subvolume each
	*snapshotter // snapshots, and the moment each is taken (taken.go)
	*quotaGroups // quota groups: simple quotas' level-1 qgroups
	*archives    // send streams out, and warren's own receive back in
	*differ      // what changed between two volumes
	*pool        // the mount of the pool, and its closing
}

// storage builds the jobs over the pool's volumes.
func (p *pool) storage() *Storage {
	vols := &volumes{root: p.root, log: p.log, cleaner: p.cleaner}
	groups := &quotaGroups{root: p.root, tableDir: p.tableDir(), log: p.log}
	return &Storage{
		volumes:     vols,
		snapshotter: &snapshotter{vols: vols, groups: groups},
		quotaGroups: groups,
		archives:    &archives{vols: vols, log: p.log},
		differ:      &differ{vols: vols, log: p.log},
		pool:        p,
	}
}

// volumes are the subvolumes at <root>/<kind>/<name>.
type volumes struct {
	root    string
	log     *slog.Logger
	cleaner *cleanerWaker // woken after deletes
	inPlace atomic.Bool   // DeleteAside deletes in place (SetDeleteInPlace)
}

// Name implements storage.Storage.
func (s *Storage) Name() string { return "btrfs" }

// Root is the directory holding the kind directories.
func (v *volumes) Root() string { return v.root }

// Path implements storage.Storage.
func (v *volumes) Path(key storage.Key) string {
	return filepath.Join(v.root, string(key.Kind), key.Name)
}

// Create implements storage.Storage.
func (v *volumes) Create(ctx context.Context, key storage.Key) (string, error) {
	if err := key.Validate(); err != nil {
		return "", err
	}
	dir, err := v.openKindDir(key.Kind)
	if err != nil {
		return "", err
	}
	defer dir.Close()
	if err := subvolCreate(int(dir.Fd()), key.Name); err != nil {
		return "", fmt.Errorf("create volume %s: %w", key, errnoKind(err))
	}
	return v.Path(key), nil
}

// SetReadOnly implements storage.Storage.
func (v *volumes) SetReadOnly(ctx context.Context, key storage.Key, readOnly bool) error {
	if err := key.Validate(); err != nil {
		return err
	}
	f, err := v.openSubvol(key)
	if err != nil {
		return fmt.Errorf("set read-only on %s: %w", key, err)
	}
	defer f.Close()
	if err := setReadOnly(int(f.Fd()), readOnly); err != nil {
		return fmt.Errorf("set read-only=%t on %s: %w", readOnly, key, errnoKind(err))
	}
	return nil
}

func setReadOnly(fd int, readOnly bool) error {
	flags, err := subvolGetFlags(fd)
	if err != nil {
		return err
	}
	want := flags &^ subvolRdonly
	if readOnly {
		want |= subvolRdonly
	}
	if want == flags {
		return nil
	}
	return subvolSetFlags(fd, want)
}

// Exchange implements storage.Storage with one renameat2(RENAME_EXCHANGE).
// btrfs refuses to move a read-only subvolume to another directory, so
// both must be writable.
func (v *volumes) Exchange(ctx context.Context, a, b storage.Key) error {
	for _, k := range []storage.Key{a, b} {
		if err := k.Validate(); err != nil {
			return err
		}
		f, err := v.openSubvol(k)
		if err != nil {
			return fmt.Errorf("exchange %s and %s: %w", a, b, err)
		}
		flags, err := subvolGetFlags(int(f.Fd()))
		f.Close()
		if err != nil {
			return fmt.Errorf("exchange %s and %s: %w", a, b, errnoKind(err))
		}
		if flags&subvolRdonly != 0 {
			return fmt.Errorf("exchange %s and %s: %s is read-only: %w", a, b, k, errdefs.ErrInvalid)
		}
	}
	da, err := v.openKindDir(a.Kind)
	if err != nil {
		return err
	}
	defer da.Close()
	db, err := v.openKindDir(b.Kind)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := unix.Renameat2(int(da.Fd()), a.Name, int(db.Fd()), b.Name, unix.RENAME_EXCHANGE); err != nil {
		return fmt.Errorf("exchange %s and %s: %w", a, b, errnoKind(err))
	}
	return nil
}

// Stat implements storage.Storage.
func (v *volumes) Stat(ctx context.Context, key storage.Key) (storage.Info, error) {
	if err := key.Validate(); err != nil {
		return storage.Info{}, err
	}
	f, err := v.openSubvol(key)
	if err != nil {
		return storage.Info{}, fmt.Errorf("stat %s: %w", key, err)
	}
	defer f.Close()
	flags, err := subvolGetFlags(int(f.Fd()))
	if err != nil {
		return storage.Info{}, fmt.Errorf("stat %s: read subvolume flags: %w", key, errnoKind(err))
	}
	info := storage.Info{
		Key:             key,
		Path:            v.Path(key),
		ReadOnly:        flags&subvolRdonly != 0,
		ExclusiveBytes:  -1,
		ReferencedBytes: -1,
	}
	if excl, ref, ok := qgroupUsage(int(f.Fd())); ok {
		info.ExclusiveBytes, info.ReferencedBytes = excl, ref
	}
	return info, nil
}

// List implements storage.Storage.
func (v *volumes) List(ctx context.Context, kind storage.Kind) ([]storage.Info, error) {
	if err := (storage.Key{Kind: kind, Name: "x"}).Validate(); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(filepath.Join(v.root, string(kind)))
	if err != nil {
		return nil, fmt.Errorf("list %s volumes: %w", kind, errnoKind(err))
	}
	out := []storage.Info{}
	for _, e := range entries { // ReadDir sorts by name
		key := storage.Key{Kind: kind, Name: e.Name()}
		if !e.IsDir() || key.Validate() != nil {
			continue
		}
		info, err := v.Stat(ctx, key)
		if errors.Is(err, errdefs.ErrNotFound) {
			continue // deleted while we listed
		}
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	return out, nil
}

func (v *volumes) openKindDir(kind storage.Kind) (*os.File, error) {
	p := filepath.Join(v.root, string(kind))
	f, err := os.OpenFile(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s (was the pool set up by Open?): %w", p, errnoKind(err))
	}
	return f, nil
}

// openSubvol opens the volume's root directory and checks that it is a
// subvolume, so that ioctls meant for one never act on a stray directory.
func (v *volumes) openSubvol(key storage.Key) (*os.File, error) {
	p := v.Path(key)
	f, err := os.OpenFile(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			return nil, fmt.Errorf("%s is not a volume: %w", p, errdefs.ErrNotFound)
		}
		return nil, fmt.Errorf("volume %s: %w", key, errnoKind(err))
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		f.Close()
		return nil, fmt.Errorf("stat %s: %w", p, err)
	}
	if st.Ino != firstFreeObjectID {
		f.Close()
		return nil, fmt.Errorf("%s is a plain directory, not a btrfs subvolume; remove it by hand: %w", p, errdefs.ErrConflict)
	}
	return f, nil
}

// errnoKind wraps a syscall error with the errdefs kind that matches it,
// keeping the errno for the message and for errors.Is.
func errnoKind(err error) error {
	var kind error
	switch {
	case errors.Is(err, unix.ENOENT):
		kind = errdefs.ErrNotFound
	case errors.Is(err, unix.EEXIST):
		kind = errdefs.ErrAlreadyExists
	case errors.Is(err, unix.EBUSY), errors.Is(err, unix.ENOTEMPTY):
		kind = errdefs.ErrConflict
	case errors.Is(err, unix.ENOSPC), errors.Is(err, unix.EDQUOT):
		kind = errdefs.ErrResourceExhausted
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
		kind = errdefs.ErrPermissionDenied
	case errors.Is(err, unix.ENOTTY), errors.Is(err, unix.EOPNOTSUPP):
		kind = errdefs.ErrUnsupported
	default:
		return err
	}
	return fmt.Errorf("%w: %w", kind, err)
}
