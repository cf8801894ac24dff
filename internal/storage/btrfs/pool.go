package btrfs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/warrenhq/warren/internal/mountinfo"

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

// pool is where the volumes live: a btrfs data directory, or a loop-backed
// image of warren's own that Open mounts (and tests unmount).
type pool struct {
	root string // <pool>/volumes: holds one directory per kind
	log  *slog.Logger

	// Set only when Open mounted (or found mounted) a loop-backed image.
	poolDir string
	image   string

	// cleaner wakes btrfs's cleaner after deletes (cleaner.go); closing
	// the pool stops it.
	cleaner *cleanerWaker
}

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
	p := &pool{log: opts.Logger.With("storage", "btrfs"), cleaner: &cleanerWaker{}}

	onBtrfs, err := IsBtrfs(dataDir)
	if err != nil {
		return nil, err
	}
	if onBtrfs {
		p.root = filepath.Join(dataDir, "volumes")
		if err := p.initRoot(false); err != nil {
			return nil, err
		}
		p.log.Info("using btrfs data directory", "root", p.root)
		return p.storage(), nil
	}

	p.poolDir = filepath.Join(dataDir, "pool")
	p.image = filepath.Join(dataDir, "btrfs.img")
	p.root = filepath.Join(p.poolDir, "volumes")
	mountedNow, err := p.mountPool(ctx, opts.ImageSize)
	if err != nil {
		return nil, err
	}
	err = p.initRoot(true)
	if err == nil {
		err = p.moveGroupTable()
	}
	if err != nil {
		if mountedNow {
			if uerr := p.Unmount(); uerr != nil {
				p.log.Warn("could not unmount the pool after a failed start", "err", uerr)
			}
		}
		return nil, err
	}
	return p.storage(), nil
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
func (p *pool) Close() error {
	p.cleaner.stop()
	return nil
}

// Unmount unmounts a loop-backed pool (the loop device then frees itself).
// It is for tests and `warren` teardown; it fails with ErrConflict while
// anything still uses the pool. It does nothing for a btrfs data directory.
func (p *pool) Unmount() error {
	p.cleaner.stop() // a wake under way holds the pool open
	if p.poolDir == "" {
		return nil
	}
	// Which loop device to wait for. Not whether to unmount: a read of
	// mountinfo while other mounts change can miss the pool's line (a
	// bench once left its pool mounted that way), so the unmount itself
	// says whether there was a mount.
	m, _, _ := mountinfo.At(p.poolDir)
	if err := unix.Unmount(p.poolDir, 0); err != nil {
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
			return nil // not mounted
		}
		if errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("unmount pool %s: still in use (stop the sandboxes first): %w: %w", p.poolDir, errdefs.ErrConflict, err)
		}
		return fmt.Errorf("unmount pool %s: %w", p.poolDir, err)
	}
	if strings.HasPrefix(m.Source, "/dev/loop") && !waitLoopFree(m.Source) {
		p.log.Warn("loop device still attached after unmount", "device", m.Source)
	}
	p.log.Info("unmounted pool", "pool", p.poolDir)
	return nil
}

// mountPool makes sure a btrfs is mounted at p.poolDir, creating the image
// if there is none. mountedNow says whether this call mounted it.
func (p *pool) mountPool(ctx context.Context, size int64) (mountedNow bool, err error) {
	if err := os.MkdirAll(p.poolDir, 0o711); err != nil {
		return false, fmt.Errorf("create pool mount point: %w", err)
	}
	m, ok, err := mountinfo.At(p.poolDir)
	if err != nil {
		return false, err
	}
	if ok {
		if m.FSType != "btrfs" {
			return false, fmt.Errorf("%s is a %s mount, not a btrfs pool: unmount it or choose another data directory: %w", p.poolDir, m.FSType, errdefs.ErrConflict)
		}
		p.log.Info("reusing mounted pool", "pool", p.poolDir, "device", m.Source)
		return false, nil
	}

	created := false
	if _, err := os.Stat(p.image); errors.Is(err, os.ErrNotExist) {
		if err := p.createImage(ctx, size); err != nil {
			return false, err
		}
		created = true
	} else if err != nil {
		return false, fmt.Errorf("stat pool image: %w", err)
	}
	undo := func() {
		if created {
			os.Remove(p.image)
		}
	}

	dev, err := attachLoop(p.image, p.log)
	if err != nil {
		undo()
		return false, err
	}
	// Closing our handle leaves the mount as the device's only user, so
	// autoclear frees it on unmount (or right away if the mount failed).
	defer dev.Close()
	// noatime: with snapshots, every atime update would copy metadata.
	if err := unix.Mount(dev.Name(), p.poolDir, "btrfs", unix.MS_NOATIME, ""); err != nil {
		dev.Close()
		undo()
		return false, fmt.Errorf("mount pool image %s (%s) at %s (is the image damaged? move it away to start a new pool): %w", p.image, dev.Name(), p.poolDir, err)
	}
	p.log.Info("mounted pool", "image", p.image, "device", dev.Name(), "pool", p.poolDir, "new", created)
	return true, nil
}

// createImage makes a sparse image and formats it. It is built under a
// temporary name and renamed into place, so an image under the final name
// is always formatted and a crash never leads to a reformat of real data.
func (p *pool) createImage(ctx context.Context, size int64) error {
	tmp := p.image + ".tmp"
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
	if err := os.Rename(tmp, p.image); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("put pool image in place: %w", err)
	}
	if err := syncPath(filepath.Dir(p.image)); err != nil {
		return err
	}
	p.log.Info("created pool image", "image", p.image, "size", size)
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

// tableDir is where the quota group table lives (quota_table.go).
func (p *pool) tableDir() string {
	if p.poolDir != "" {
		return filepath.Dir(p.poolDir) // the data directory
	}
	return p.root
}

// moveGroupTable moves a quota group table that an older warren kept in
// the pool to the data directory. A crash in between leaves both files,
// and the one in the data directory wins on the next start.
func (p *pool) moveGroupTable() error {
	old := filepath.Join(p.root, groupTableFile)
	b, err := os.ReadFile(old)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read the quota group table in the pool: %w", err)
	}
	dst := filepath.Join(p.tableDir(), groupTableFile)
	if _, err := os.Stat(dst); errors.Is(err, os.ErrNotExist) {
		if err := writeFileSynced(dst, b); err != nil {
			return fmt.Errorf("move the quota group table out of the pool: %w", err)
		}
	}
	if err := os.Remove(old); err != nil {
		return fmt.Errorf("remove the quota group table moved out of the pool: %w", err)
	}
	p.log.Info("moved the quota group table out of the pool", "to", dst)
	return nil
}

// writeFileSynced writes name whole, through a temporary file renamed
// over it, and syncs both.
func writeFileSynced(name string, b []byte) error {
	tmp := name + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, name)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return syncPath(filepath.Dir(name))
}

// initRoot makes the volumes directory and one directory per kind. In a
// pool of our own, a missing volumes directory means the filesystem is
// fresh from mkfs with nothing written yet: that is the moment to enable
// simple quotas, whose accounting only covers extents written after.
func (p *pool) initRoot(ownPool bool) error {
	if _, err := os.Stat(p.root); errors.Is(err, os.ErrNotExist) && ownPool {
		p.singleMetadata()
		p.enableQuotas()
	}
	if err := os.MkdirAll(p.root, 0o711); err != nil {
		return fmt.Errorf("create volumes directory: %w", err)
	}
	for _, k := range storage.Kinds {
		d := filepath.Join(p.root, string(k))
		if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("create %s directory: %w", k, err)
		}
		if err := storage.CloseToOthers(d); err != nil {
			return err
		}
	}
	// A crash between a DeleteAside's move and its delete (aside.go).
	if err := (&volumes{root: p.root, log: p.log, cleaner: p.cleaner}).sweepDropping(); err != nil {
		p.log.Warn("could not drop every volume left being deleted", "err", err)
	}
	return nil
}

// singleMetadata converts a new pool's metadata to the single profile (see
// balance.go); a pool that refuses keeps DUP, which only costs speed.
func (p *pool) singleMetadata() {
	p.tunePool(convertMetadataSingle, "converted the pool's metadata to single",
		"kernel refused to convert the pool's metadata to single; it stays DUP (snapshots are slower)")
}

// enableQuotas turns on simple quotas; a kernel without them (before 6.7)
// still gives a working pool, only without per-volume sizes.
func (p *pool) enableQuotas() {
	p.tunePool(enableSimpleQuota, "enabled btrfs simple quotas",
		"kernel refused btrfs simple quotas; volume sizes will be unknown")
}

// tunePool runs an optional ioctl on the pool's root: a refusal is logged
// as refused, since the pool works without it.
func (p *pool) tunePool(ioctl func(fd int) error, done, refused string) {
	f, err := os.Open(p.poolDir)
	if err != nil {
		p.log.Warn(refused, "err", err)
		return
	}
	defer f.Close()
	if err := ioctl(int(f.Fd())); err != nil {
		p.log.Warn(refused, "err", err)
		return
	}
	p.log.Info(done, "pool", p.poolDir)
}
