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

// Storage is a pool of btrfs subvolumes.
type Storage struct {
	root string // <pool>/volumes: holds one directory per kind
	log  *slog.Logger
	// highestSubvol is the highest subvolume id seen made since the pool was
	// opened: new ids only grow, so watchSnapshot searches above it.
	highestSubvol atomic.Uint64

	// Set only when Open mounted (or found mounted) a loop-backed image.
	poolDir string
	image   string

	// reclaimed is called after the space of deleted volumes was hurried
	// out of a quota group (tests count it).
	reclaimed func()
	// cleaner wakes btrfs's cleaner after deletes (cleaner.go).
	cleaner cleanerWaker
}

// Name implements storage.Storage.
func (s *Storage) Name() string { return "btrfs" }

// Root is the directory holding the kind directories.
func (s *Storage) Root() string { return s.root }

// Path implements storage.Storage.
func (s *Storage) Path(key storage.Key) string {
	return filepath.Join(s.root, string(key.Kind), key.Name)
}

// Create implements storage.Storage.
func (s *Storage) Create(ctx context.Context, key storage.Key) (string, error) {
	if err := key.Validate(); err != nil {
		return "", err
	}
	dir, err := s.openKindDir(key.Kind)
	if err != nil {
		return "", err
	}
	defer dir.Close()
	if err := subvolCreate(int(dir.Fd()), key.Name); err != nil {
		return "", fmt.Errorf("create volume %s: %w", key, errnoKind(err))
	}
	return s.Path(key), nil
}

// Snapshot implements storage.Storage.
func (s *Storage) Snapshot(ctx context.Context, parent, key storage.Key, opts storage.SnapshotOptions) (string, error) {
	if err := parent.Validate(); err != nil {
		return "", err
	}
	if err := key.Validate(); err != nil {
		return "", err
	}
	src, err := s.openSubvol(parent)
	if err != nil {
		return "", fmt.Errorf("snapshot %s: source: %w", parent, err)
	}
	defer src.Close()
	dir, err := s.openKindDir(key.Kind)
	if err != nil {
		return "", err
	}
	defer dir.Close()
	qgroup, undoGroup, err := s.snapshotGroup(opts.Group, !opts.ReadOnly)
	if err != nil {
		return "", fmt.Errorf("snapshot %s as %s: %w", parent, key, err)
	}
	var stopWatch func()
	if opts.Taken != nil {
		stopWatch = s.watchSnapshot(int(src.Fd()), int(dir.Fd()), key.Name, opts.Taken)
	}
	err = snapCreateInGroup(int(src.Fd()), int(dir.Fd()), key.Name, opts.ReadOnly, qgroup)
	if stopWatch != nil {
		stopWatch()
	}
	if err != nil {
		undoGroup()
		return "", fmt.Errorf("snapshot %s as %s: %w", parent, key, errnoKind(err))
	}
	return s.Path(key), nil
}

// watchSnapshot starts watching for the moment the snapshot name, about to
// be made of srcFd inside dirFd, has its content fixed (taken.go), and
// calls taken then. The returned stop ends the watch and waits for it, so
// taken has returned (or will never be called) once stop has.
func (s *Storage) watchSnapshot(srcFd, dirFd int, name string, taken func()) (stop func()) {
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
	w := &rootRefWatch{fd: dirFd, parentTree: parentTree, dirIno: dirIno, floor: max(srcID, s.highestSubvol.Load()), name: name}
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
		raiseTo(&s.highestSubvol, w.id)
	}
}

// SetReadOnly implements storage.Storage.
func (s *Storage) SetReadOnly(ctx context.Context, key storage.Key, readOnly bool) error {
	if err := key.Validate(); err != nil {
		return err
	}
	f, err := s.openSubvol(key)
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
func (s *Storage) Exchange(ctx context.Context, a, b storage.Key) error {
	for _, k := range []storage.Key{a, b} {
		if err := k.Validate(); err != nil {
			return err
		}
		f, err := s.openSubvol(k)
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
	da, err := s.openKindDir(a.Kind)
	if err != nil {
		return err
	}
	defer da.Close()
	db, err := s.openKindDir(b.Kind)
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
func (s *Storage) Stat(ctx context.Context, key storage.Key) (storage.Info, error) {
	if err := key.Validate(); err != nil {
		return storage.Info{}, err
	}
	f, err := s.openSubvol(key)
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
		Path:            s.Path(key),
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
func (s *Storage) List(ctx context.Context, kind storage.Kind) ([]storage.Info, error) {
	if err := (storage.Key{Kind: kind, Name: "x"}).Validate(); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(filepath.Join(s.root, string(kind)))
	if err != nil {
		return nil, fmt.Errorf("list %s volumes: %w", kind, errnoKind(err))
	}
	out := []storage.Info{}
	for _, e := range entries { // ReadDir sorts by name
		key := storage.Key{Kind: kind, Name: e.Name()}
		if !e.IsDir() || key.Validate() != nil {
			continue
		}
		info, err := s.Stat(ctx, key)
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

func (s *Storage) openKindDir(kind storage.Kind) (*os.File, error) {
	p := filepath.Join(s.root, string(kind))
	f, err := os.OpenFile(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s (was the pool set up by Open?): %w", p, errnoKind(err))
	}
	return f, nil
}

// openSubvol opens the volume's root directory and checks that it is a
// subvolume, so that ioctls meant for one never act on a stray directory.
func (s *Storage) openSubvol(key storage.Key) (*os.File, error) {
	p := s.Path(key)
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
