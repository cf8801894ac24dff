package btrfs

import (
	"context"
	"errors"
	"fmt"
	"github.com/warrenhq/warren/internal/mountinfo"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/storage"
)

// DefaultImageSize is the size of the sparse pool image made when the data
// directory is not on btrfs. Sparse: it costs only what is written.
const DefaultImageSize int64 = 20 << 30

// poolNodeSize is the tree node size of a new pool (see createImage).
const poolNodeSize = 4096

// minImageSize is a little above what mkfs.btrfs accepts (~110 MiB).
const minImageSize int64 = 128 << 20

// Options configures Open.
type Options struct {
	// DataDir is warren's data directory. If it is on btrfs, volumes live in
	// <DataDir>/volumes; otherwise in a loop-mounted image <DataDir>/btrfs.img
	// mounted at <DataDir>/pool, with volumes in <DataDir>/pool/volumes.
	DataDir string
	// ImageSize is the size of a new image (DefaultImageSize if 0). An
	// existing image is never resized.
	ImageSize int64
	Logger    *slog.Logger
}

// Open finds or builds the pool under opts.DataDir and returns it.
//
// A pool image already mounted at <DataDir>/pool is reused (sandboxes keep
// running across daemon restarts); an image that exists but is not mounted
// is attached and mounted again, never reformatted.
func Open(ctx context.Context, opts Options) (*Storage, error) {
	if opts.DataDir == "" {
		return nil, fmt.Errorf("btrfs storage: the data directory is not set: %w", errdefs.ErrInvalid)
	}
	if opts.ImageSize == 0 {
		opts.ImageSize = DefaultImageSize
	}
	if opts.ImageSize < minImageSize {
		return nil, fmt.Errorf("btrfs storage: image size %d is below the %d bytes mkfs.btrfs needs: %w", opts.ImageSize, minImageSize, errdefs.ErrInvalid)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	dataDir, err := filepath.Abs(opts.DataDir)
	if err != nil {
		return nil, fmt.Errorf("btrfs storage: data directory %q: %w", opts.DataDir, errdefs.ErrInvalid)
	}
	if err := os.MkdirAll(dataDir, 0o711); err != nil {
		return nil, fmt.Errorf("btrfs storage: create data directory: %w", err)
	}
	// mountinfo names mount points by their real path.
	if dataDir, err = filepath.EvalSymlinks(dataDir); err != nil {
		return nil, fmt.Errorf("btrfs storage: resolve data directory: %w", err)
	}
	s := &Storage{log: opts.Logger.With("storage", "btrfs")}

	onBtrfs, err := IsBtrfs(dataDir)
	if err != nil {
		return nil, err
	}
	if onBtrfs {
		s.root = filepath.Join(dataDir, "volumes")
		if err := s.initRoot(false); err != nil {
			return nil, err
		}
		s.log.Info("using btrfs data directory", "root", s.root)
		return s, nil
	}

	s.poolDir = filepath.Join(dataDir, "pool")
	s.image = filepath.Join(dataDir, "btrfs.img")
	s.root = filepath.Join(s.poolDir, "volumes")
	mountedNow, err := s.mountPool(ctx, opts.ImageSize)
	if err != nil {
		return nil, err
	}
	if err := s.initRoot(true); err != nil {
		if mountedNow {
			if uerr := s.Unmount(); uerr != nil {
				s.log.Warn("could not unmount the pool after a failed start", "err", uerr)
			}
		}
		return nil, err
	}
	return s, nil
}

// IsBtrfs tells whether path is on a btrfs filesystem.
func IsBtrfs(path string) (bool, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return false, fmt.Errorf("statfs %s: %w", path, err)
	}
	return st.Type == unix.BTRFS_SUPER_MAGIC, nil
}

// Close implements storage.Closer. The pool stays mounted so that
// sandboxes keep running across daemon restarts; only the cleaner's
// pending wake is cancelled (one under way is waited for).
func (s *Storage) Close() error {
	s.cleaner.stop()
	return nil
}

// Unmount unmounts a loop-backed pool (the loop device then frees itself).
// It is for tests and `warren` teardown; it fails with ErrConflict while
// anything still uses the pool. It does nothing for a btrfs data directory.
func (s *Storage) Unmount() error {
	s.cleaner.stop() // a wake under way holds the pool open
	if s.poolDir == "" {
		return nil
	}
	// Which loop device to wait for. Not whether to unmount: a read of
	// mountinfo while other mounts change can miss the pool's line (a
	// bench once left its pool mounted that way), so the unmount itself
	// says whether there was a mount.
	m, _, _ := mountinfo.At(s.poolDir)
	if err := unix.Unmount(s.poolDir, 0); err != nil {
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
			return nil // not mounted
		}
		if errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("unmount pool %s: still in use (stop the sandboxes first): %w: %w", s.poolDir, errdefs.ErrConflict, err)
		}
		return fmt.Errorf("unmount pool %s: %w", s.poolDir, err)
	}
	if strings.HasPrefix(m.Source, "/dev/loop") && !waitLoopFree(m.Source) {
		s.log.Warn("loop device still attached after unmount", "device", m.Source)
	}
	s.log.Info("unmounted pool", "pool", s.poolDir)
	return nil
}

// mountPool makes sure a btrfs is mounted at s.poolDir, creating the image
// if there is none. mountedNow says whether this call mounted it.
func (s *Storage) mountPool(ctx context.Context, size int64) (mountedNow bool, err error) {
	if err := os.MkdirAll(s.poolDir, 0o711); err != nil {
		return false, fmt.Errorf("create pool mount point: %w", err)
	}
	m, ok, err := mountinfo.At(s.poolDir)
	if err != nil {
		return false, err
	}
	if ok {
		if m.FSType != "btrfs" {
			return false, fmt.Errorf("%s is a %s mount, not a btrfs pool: unmount it or choose another data directory: %w", s.poolDir, m.FSType, errdefs.ErrConflict)
		}
		s.log.Info("reusing mounted pool", "pool", s.poolDir, "device", m.Source)
		return false, nil
	}

	created := false
	if _, err := os.Stat(s.image); errors.Is(err, os.ErrNotExist) {
		if err := s.createImage(ctx, size); err != nil {
			return false, err
		}
		created = true
	} else if err != nil {
		return false, fmt.Errorf("stat pool image: %w", err)
	}
	undo := func() {
		if created {
			os.Remove(s.image)
		}
	}

	dev, err := attachLoop(s.image, s.log)
	if err != nil {
		undo()
		return false, err
	}
	// Closing our handle leaves the mount as the device's only user, so
	// autoclear frees it on unmount (or right away if the mount failed).
	defer dev.Close()
	// noatime: with snapshots, every atime update would copy metadata.
	if err := unix.Mount(dev.Name(), s.poolDir, "btrfs", unix.MS_NOATIME, ""); err != nil {
		dev.Close()
		undo()
		return false, fmt.Errorf("mount pool image %s (%s) at %s (is the image damaged? move it away to start a new pool): %w", s.image, dev.Name(), s.poolDir, err)
	}
	s.log.Info("mounted pool", "image", s.image, "device", dev.Name(), "pool", s.poolDir, "new", created)
	return true, nil
}

// createImage makes a sparse image and formats it. It is built under a
// temporary name and renamed into place, so an image under the final name
// is always formatted and a crash never leads to a reformat of real data.
func (s *Storage) createImage(ctx context.Context, size int64) error {
	tmp := s.image + ".tmp"
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove leftover %s: %w", tmp, err)
	}
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("create pool image: %w", err)
	}
	err = f.Truncate(size)
	f.Close()
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("size pool image to %d bytes: %w", size, errnoKind(err))
	}
	mkfs, err := exec.LookPath("mkfs.btrfs")
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("mkfs.btrfs not found: install btrfs-progs: %w", errdefs.ErrUnavailable)
	}
	// mkfs's default metadata profile (DUP) sizes metadata's first chunk
	// for the pool; initRoot then converts it to single (balance.go).
	//
	// 4 KiB tree nodes instead of 16: copying a node shared with a snapshot
	// (a turn's first writes) and dropping a snapshot (the archiver's
	// deletes) both update the reference of every child of each node they
	// touch, so smaller nodes mean less to update and less to write. A/B on
	// the 1 GiB / 100k-file bench, 150 turns: turn 28.1 → 25.8 ms, a turn
	// scattered over 25 directories 46.6 → 35.9 ms, 32 turns at once p99
	// 232 → 190 ms. The cost: an xattr value fits in about 3.9 KiB (ext4's
	// limit is a 4 KiB block too).
	out, err := exec.CommandContext(ctx, mkfs, "-q", "-L", "warren", "--nodesize", strconv.Itoa(poolNodeSize), tmp).CombinedOutput()
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("format pool image: mkfs.btrfs: %v: %s", err, strings.TrimSpace(string(out)))
	}
	if err := syncPath(tmp); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, s.image); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("put pool image in place: %w", err)
	}
	if err := syncPath(filepath.Dir(s.image)); err != nil {
		return err
	}
	s.log.Info("created pool image", "image", s.image, "size", size)
	return nil
}

func syncPath(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return fmt.Errorf("sync %s: %w", p, err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", p, err)
	}
	return nil
}

// initRoot makes the volumes directory and one directory per kind. In a
// pool of our own, a missing volumes directory means the filesystem is
// fresh from mkfs with nothing written yet: that is the moment to enable
// simple quotas, whose accounting only covers extents written after.
func (s *Storage) initRoot(ownPool bool) error {
	if _, err := os.Stat(s.root); errors.Is(err, os.ErrNotExist) && ownPool {
		s.singleMetadata()
		s.enableQuotas()
	}
	if err := os.MkdirAll(s.root, 0o711); err != nil {
		return fmt.Errorf("create volumes directory: %w", err)
	}
	for _, k := range storage.Kinds {
		if err := os.Mkdir(filepath.Join(s.root, string(k)), 0o711); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("create %s directory: %w", k, err)
		}
	}
	return nil
}

// singleMetadata converts a new pool's metadata to the single profile (see
// balance.go); a pool that refuses keeps DUP, which only costs speed.
func (s *Storage) singleMetadata() {
	s.tunePool(convertMetadataSingle, "converted the pool's metadata to single",
		"kernel refused to convert the pool's metadata to single; it stays DUP (snapshots are slower)")
}

// enableQuotas turns on simple quotas; a kernel without them (before 6.7)
// still gives a working pool, only without per-volume sizes.
func (s *Storage) enableQuotas() {
	s.tunePool(enableSimpleQuota, "enabled btrfs simple quotas",
		"kernel refused btrfs simple quotas; volume sizes will be unknown")
}

// tunePool runs an optional ioctl on the pool's root: a refusal is logged
// as refused, since the pool works without it.
func (s *Storage) tunePool(ioctl func(fd int) error, done, refused string) {
	f, err := os.Open(s.poolDir)
	if err != nil {
		s.log.Warn(refused, "err", err)
		return
	}
	defer f.Close()
	if err := ioctl(int(f.Fd())); err != nil {
		s.log.Warn(refused, "err", err)
		return
	}
	s.log.Info(done, "pool", s.poolDir)
}
