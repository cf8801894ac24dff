// Package dir keeps warren's volumes as plain directories: the fallback for
// hosts where a btrfs pool cannot be had. Same semantics as btrfs, but a
// snapshot copies the tree (reflinking files where the filesystem can).
//
// Layout under root:
//
//	<kind>/<name>           a volume
//	<kind>/.<name>.ro       marker: the volume is read-only
//	<kind>/.tmp-<name>-*    a snapshot being copied (renamed into place when whole)
//	<kind>/.trash-<name>-*  a volume being deleted
//
// Volume names start with a letter or digit, so the dot-names never clash.
// Read-only is only recorded, not enforced by the filesystem. One process
// owns a pool: New removes what a crashed one left behind.
package dir

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
	"github.com/warrenhq/warren/internal/storage"
)

var _ storage.Storage = (*Storage)(nil)

const (
	tmpPrefix   = ".tmp-"
	trashPrefix = ".trash-"
	roSuffix    = ".ro"
)

// Storage is a pool of plain directories.
type Storage struct {
	root string
	// locks serialise the short steps that change what stands at a key
	// (marker + rename), so a marker always belongs to the volume beside
	// it. Striped: a lock per key would need reference counting.
	locks [64]sync.Mutex
}

// New opens (creating if needed) a pool rooted at root.
func New(root string) (*Storage, error) {
	if root == "" {
		return nil, fmt.Errorf("dir storage: root directory is not set: %w", errdefs.ErrInvalid)
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("dir storage: root %q: %w", root, errdefs.ErrInvalid)
	}
	s := &Storage{root: abs}
	if err := os.MkdirAll(abs, 0o711); err != nil {
		return nil, fmt.Errorf("dir storage: create root: %w", err)
	}
	for _, k := range storage.Kinds {
		d := filepath.Join(abs, string(k))
		if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("dir storage: create %s directory: %w", k, err)
		}
		if err := storage.CloseToOthers(d); err != nil {
			return nil, err
		}
		if err := s.cleanLeftovers(d); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// cleanLeftovers removes half-copied snapshots, half-deleted volumes and
// markers whose volume is gone, all left by a crash.
func (s *Storage) cleanLeftovers(kindDir string) error {
	entries, err := os.ReadDir(kindDir)
	if err != nil {
		return fmt.Errorf("dir storage: read %s: %w", kindDir, err)
	}
	for _, e := range entries {
		n := e.Name()
		p := filepath.Join(kindDir, n)
		switch {
		case strings.HasPrefix(n, tmpPrefix), strings.HasPrefix(n, trashPrefix):
			if err := removeAll(p); err != nil {
				return fmt.Errorf("dir storage: remove leftover %s: %w", p, err)
			}
		case strings.HasPrefix(n, ".") && strings.HasSuffix(n, roSuffix):
			vol := filepath.Join(kindDir, strings.TrimSuffix(strings.TrimPrefix(n, "."), roSuffix))
			if _, err := os.Lstat(vol); errors.Is(err, os.ErrNotExist) {
				os.Remove(p)
			}
		}
	}
	return nil
}

// Name implements storage.Storage.
func (s *Storage) Name() string { return "dir" }

// Path implements storage.Storage.
func (s *Storage) Path(key storage.Key) string {
	return filepath.Join(s.root, string(key.Kind), key.Name)
}

func (s *Storage) markerPath(key storage.Key) string {
	return filepath.Join(s.root, string(key.Kind), "."+key.Name+roSuffix)
}

func (s *Storage) lock(key storage.Key) func() {
	m := &s.locks[s.lockIndex(key)]
	m.Lock()
	return m.Unlock
}

func (s *Storage) lockIndex(key storage.Key) int {
	h := fnv.New32a()
	h.Write([]byte(key.String()))
	return int(h.Sum32() % uint32(len(s.locks)))
}

// Create implements storage.Storage.
func (s *Storage) Create(ctx context.Context, key storage.Key) (string, error) {
	if err := key.Validate(); err != nil {
		return "", err
	}
	defer s.lock(key)()
	p := s.Path(key)
	if err := s.clearStaleMarker(key); err != nil {
		return "", fmt.Errorf("create volume %s: %w", key, err)
	}
	if err := os.Mkdir(p, 0o755); err != nil {
		return "", fmt.Errorf("create volume %s: %w", key, errnoKind(err))
	}
	return p, nil
}

// clearStaleMarker removes a read-only marker left without its volume, so
// that it cannot stick to a new volume of the same name. Called under the
// key's lock.
func (s *Storage) clearStaleMarker(key storage.Key) error {
	if _, err := os.Lstat(s.Path(key)); err == nil {
		return fmt.Errorf("%s: %w", s.Path(key), errdefs.ErrAlreadyExists)
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.Remove(s.markerPath(key)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// Snapshot implements storage.Storage. The tree is copied under a temporary
// name and renamed into place whole, so a crash or a cancelled ctx never
// leaves a partial copy under the final name.
func (s *Storage) Snapshot(ctx context.Context, parent, key storage.Key, opts storage.SnapshotOptions) (string, error) {
	if err := parent.Validate(); err != nil {
		return "", err
	}
	if err := key.Validate(); err != nil {
		return "", err
	}
	src := s.Path(parent)
	if st, err := os.Lstat(src); err != nil {
		return "", fmt.Errorf("snapshot %s: source: %w", parent, errnoKind(err))
	} else if !st.IsDir() {
		return "", fmt.Errorf("snapshot %s: source %s is not a directory: %w", parent, src, errdefs.ErrNotFound)
	}
	dst := s.Path(key)
	// Fail early, before a long copy, when the name is taken.
	if _, err := os.Lstat(dst); err == nil {
		return "", fmt.Errorf("snapshot %s as %s: %w", parent, key, errdefs.ErrAlreadyExists)
	}

	tmp := filepath.Join(s.root, string(key.Kind), tmpPrefix+key.Name+"-"+ids.New(8))
	if err := copyTree(ctx, src, tmp); err != nil {
		removeAll(tmp)
		return "", fmt.Errorf("snapshot %s as %s: copy: %w", parent, key, err)
	}
	if err := s.publish(key, tmp, opts.ReadOnly); err != nil {
		removeAll(tmp)
		return "", fmt.Errorf("snapshot %s as %s: %w", parent, key, err)
	}
	return dst, nil
}

// publish puts the finished copy tmp in place under key, with its marker.
func (s *Storage) publish(key storage.Key, tmp string, readOnly bool) error {
	defer s.lock(key)()
	if err := s.clearStaleMarker(key); err != nil {
		return err
	}
	marker := s.markerPath(key)
	if readOnly {
		// Marker first: the volume must never be seen without it.
		if err := writeMarker(marker); err != nil {
			return err
		}
	}
	if err := renameNoReplace(tmp, s.Path(key)); err != nil {
		if readOnly {
			os.Remove(marker)
		}
		return errnoKind(err)
	}
	return nil
}

// SetReadOnly implements storage.Storage.
func (s *Storage) SetReadOnly(ctx context.Context, key storage.Key, readOnly bool) error {
	if err := key.Validate(); err != nil {
		return err
	}
	defer s.lock(key)()
	if err := s.checkVolume(key); err != nil {
		return fmt.Errorf("set read-only on %s: %w", key, err)
	}
	marker := s.markerPath(key)
	if readOnly {
		return writeMarker(marker)
	}
	if err := os.Remove(marker); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("set %s writable: %w", key, err)
	}
	return nil
}

// Exchange implements storage.Storage with one renameat2(RENAME_EXCHANGE)
// of the two directories. Read-only volumes are refused, as btrfs must.
func (s *Storage) Exchange(ctx context.Context, a, b storage.Key) error {
	if err := a.Validate(); err != nil {
		return err
	}
	if err := b.Validate(); err != nil {
		return err
	}
	defer s.lockPair(a, b)()
	for _, k := range []storage.Key{a, b} {
		if err := s.checkVolume(k); err != nil {
			return fmt.Errorf("exchange %s and %s: %w", a, b, err)
		}
		if _, err := os.Stat(s.markerPath(k)); err == nil {
			return fmt.Errorf("exchange %s and %s: %s is read-only: %w", a, b, k, errdefs.ErrInvalid)
		}
	}
	if err := unix.Renameat2(unix.AT_FDCWD, s.Path(a), unix.AT_FDCWD, s.Path(b), unix.RENAME_EXCHANGE); err != nil {
		return fmt.Errorf("exchange %s and %s: %w", a, b, errnoKind(err))
	}
	return nil
}

// lockPair takes the locks of two keys in a fixed order (once if they
// share one), so that two exchanges cannot wait on each other.
func (s *Storage) lockPair(a, b storage.Key) func() {
	ia, ib := s.lockIndex(a), s.lockIndex(b)
	if ia > ib {
		ia, ib = ib, ia
	}
	s.locks[ia].Lock()
	if ib != ia {
		s.locks[ib].Lock()
	}
	return func() {
		if ib != ia {
			s.locks[ib].Unlock()
		}
		s.locks[ia].Unlock()
	}
}

// Delete implements storage.Storage. The volume is first renamed out of
// the way, so that it is gone under its name at once, then removed.
func (s *Storage) Delete(ctx context.Context, key storage.Key) error {
	if err := key.Validate(); err != nil {
		return err
	}
	trash := filepath.Join(s.root, string(key.Kind), trashPrefix+key.Name+"-"+ids.New(8))
	err := func() error {
		defer s.lock(key)()
		if err := s.checkVolume(key); err != nil {
			return err
		}
		if err := os.Rename(s.Path(key), trash); err != nil {
			return errnoKind(err)
		}
		if err := os.Remove(s.markerPath(key)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}()
	if err != nil {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	if err := removeAll(trash); err != nil {
		return fmt.Errorf("delete %s: remove %s: %w", key, trash, err)
	}
	return nil
}

// Stat implements storage.Storage.
func (s *Storage) Stat(ctx context.Context, key storage.Key) (storage.Info, error) {
	if err := key.Validate(); err != nil {
		return storage.Info{}, err
	}
	if err := s.checkVolume(key); err != nil {
		return storage.Info{}, fmt.Errorf("stat %s: %w", key, err)
	}
	_, err := os.Lstat(s.markerPath(key))
	return storage.Info{
		Key:             key,
		Path:            s.Path(key),
		ReadOnly:        err == nil,
		ExclusiveBytes:  -1,
		ReferencedBytes: -1,
	}, nil
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
			continue // markers, temporaries, strays
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

// checkVolume returns ErrNotFound unless a volume directory stands at key.
func (s *Storage) checkVolume(key storage.Key) error {
	st, err := os.Lstat(s.Path(key))
	if err != nil {
		return errnoKind(err)
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a directory: %w", s.Path(key), errdefs.ErrNotFound)
	}
	return nil
}

func writeMarker(p string) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("write read-only marker: %w", err)
	}
	return f.Close()
}

// renameNoReplace renames without ever replacing: a plain rename(2) would
// silently replace an empty directory standing at newpath.
func renameNoReplace(oldpath, newpath string) error {
	err := unix.Renameat2(unix.AT_FDCWD, oldpath, unix.AT_FDCWD, newpath, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		// A filesystem without RENAME_NOREPLACE: the key's lock and the
		// check under it keep this process from racing itself.
		if _, err := os.Lstat(newpath); err == nil {
			return unix.EEXIST
		}
		return os.Rename(oldpath, newpath)
	}
	return err
}

// removeAll removes a tree, making directories writable first when removal
// is refused (a non-root caller facing a read-only directory).
func removeAll(p string) error {
	err := os.RemoveAll(p)
	if err == nil || !errors.Is(err, os.ErrPermission) {
		return err
	}
	filepath.WalkDir(p, func(q string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(q, 0o700)
		}
		return nil
	})
	return os.RemoveAll(p)
}

// errnoKind wraps a filesystem error with the errdefs kind that matches it.
func errnoKind(err error) error {
	var kind error
	switch {
	case errors.Is(err, unix.ENOENT):
		kind = errdefs.ErrNotFound
	case errors.Is(err, unix.EEXIST), errors.Is(err, unix.ENOTEMPTY):
		kind = errdefs.ErrAlreadyExists
	case errors.Is(err, unix.ENOSPC), errors.Is(err, unix.EDQUOT):
		kind = errdefs.ErrResourceExhausted
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
		kind = errdefs.ErrPermissionDenied
	default:
		return err
	}
	if errors.Is(err, kind) {
		return err
	}
	return fmt.Errorf("%w: %w", kind, err)
}
