package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/agentconn"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
	"github.com/warrenhq/warren/internal/runtime"
	"github.com/warrenhq/warren/internal/storage"
)

// SnapshotResult describes a snapshot just taken.
type SnapshotResult struct {
	// Info describes the new volume. While Settling its sizes are not
	// known yet (-1).
	Info storage.Info
	// Frozen is how long the sandbox's processes were frozen.
	Frozen time.Duration
	// Synced is how long writing back dirty data before the freeze took.
	Synced time.Duration
	// Settling says Snapshot returned once the content was fixed, before
	// the snapshot was written out; settled gets the outcome.
	Settling bool
}

// snapshotRuntime is what snapshots need of the runtime: a freeze around
// the snapshot, and a rollback's stop.
type snapshotRuntime interface {
	Capabilities() runtime.Capabilities
	Pause(ctx context.Context, id string) error
	Resume(ctx context.Context, id string) error
	Destroy(ctx context.Context, id string) error
}

// snapshots takes filesystem snapshots of sandboxes (frozen.go), rolls
// sandboxes back to them, and reads and compares them.
type snapshots struct {
	pool    *volumes
	runtime snapshotRuntime
	// writeBacks writes a sandbox's dirty data back before its freeze
	// (writeBackTickets).
	writeBacks interface {
		writeBackBeforeSnapshot(ctx context.Context, id string) error
	}
	// launch restarts a rolled-back sandbox's processes (launcher).
	launch interface {
		admit(ctx context.Context) (release func(), err error)
		start(ctx context.Context, spec Spec, root string, conn *agentconn.Conn) (runtime.Status, error)
	}
	sockets agentSockets
	images  memoryDir
	log     *slog.Logger
}

// SnapshotStopped takes a read-only snapshot of a stopped sandbox's kept
// tree. Nothing runs in it, so there is nothing to freeze; the snapshot
// ioctl writes back whatever its killed processes left unwritten.
func (s *snapshots) SnapshotStopped(ctx context.Context, id, snapID, group string) (SnapshotResult, error) {
	if err := s.pool.unsettled.sandbox(ctx, id); err != nil {
		return SnapshotResult{}, err
	}
	if _, err := s.pool.snapshotVolume(context.WithoutCancel(ctx), sandboxKey(id), snapshotKey(snapID), storage.SnapshotOptions{ReadOnly: true, Group: group}); err != nil {
		return SnapshotResult{}, fmt.Errorf("snapshot stopped sandbox %s: %w", id, err)
	}
	info, err := s.pool.st.Stat(context.WithoutCancel(ctx), snapshotKey(snapID))
	return SnapshotResult{Info: info}, err
}

// DeleteSnapshot removes a snapshot's volume. A missing volume is not an
// error.
func (s *snapshots) DeleteSnapshot(ctx context.Context, snapID string) error {
	// Even a snapshot that failed to commit: its call must be over.
	_ = s.pool.unsettled.snapshot(context.WithoutCancel(ctx), snapID)
	if s.images != "" {
		if err := removeMemoryImage(s.images.snapshotImage(snapID)); err != nil {
			return err
		}
	}
	err := s.pool.st.Delete(context.WithoutCancel(ctx), snapshotKey(snapID))
	if errdefs.IsNotFound(err) {
		return nil
	}
	return err
}

// SnapshotInfo describes a snapshot's volume (sizes included).
func (s *snapshots) SnapshotInfo(ctx context.Context, snapID string) (storage.Info, error) {
	if err := s.pool.unsettled.snapshot(ctx, snapID); err != nil {
		return storage.Info{}, err
	}
	return s.pool.st.Stat(ctx, snapshotKey(snapID))
}

// Rollback replaces a sandbox's root filesystem with a writable copy of a
// snapshot and restarts its processes (a bind-mounted subvolume cannot be
// swapped under running processes). The sandbox keeps its id, its agent
// socket and its limits. On error the sandbox is left stopped; the caller
// marks it failed.
func (s *snapshots) Rollback(ctx context.Context, spec Spec, snapID string, conn *agentconn.Conn) error {
	ctx = context.WithoutCancel(ctx)
	if err := s.pool.unsettled.snapshot(ctx, snapID); err != nil {
		return err
	}
	if err := s.pool.unsettled.sandbox(ctx, spec.ID); err != nil {
		return err
	}
	if _, err := s.pool.st.Stat(ctx, snapshotKey(snapID)); err != nil {
		return fmt.Errorf("snapshot %s: %w", snapID, err)
	}
	if err := s.runtime.Destroy(ctx, spec.ID); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("stop sandbox %s: %w", spec.ID, err)
	}
	// Build the new root beside the old one, then swap the two in one
	// rename, so that the sandbox's name holds a whole root at every
	// instant (a crash leaves the other in the scratch volume, which
	// start-up removes) and a failed copy leaves the old tree in place.
	// The scratch name is this rollback's own: the old root it ends up
	// holding is dropped in the background, and the next rollback must not
	// wait for that.
	t0 := time.Now()
	scratch := storage.Key{Kind: storage.KindScratch, Name: "rollback-" + spec.ID + "-" + ids.New(6)}
	if _, err := s.pool.snapshotVolume(ctx, snapshotKey(snapID), scratch, storage.SnapshotOptions{Group: spec.Group}); err != nil {
		return fmt.Errorf("copy snapshot %s: %w", snapID, err)
	}
	t1 := time.Now()
	err := s.pool.st.Exchange(ctx, scratch, sandboxKey(spec.ID))
	if errdefs.IsNotFound(err) {
		// No old root (a crash took it): put the copy in place.
		if _, err = s.pool.snapshotVolume(ctx, scratch, sandboxKey(spec.ID), storage.SnapshotOptions{Group: spec.Group}); err != nil {
			err = fmt.Errorf("install new root of %s: %w", spec.ID, err)
		}
	}
	if err != nil {
		if derr := s.pool.st.Delete(ctx, scratch); derr != nil {
			s.log.Warn("remove rollback scratch volume", "volume", scratch.String(), "err", derr)
		}
		return fmt.Errorf("swap in the new root of %s: %w", spec.ID, err)
	}
	// The scratch volume now holds the old root. Dropping it can cost
	// seconds: the delete evicts every inode of it the kernel has cached
	// (0.3–1 s once the sandbox has read a 100k-file workspace), and
	// btrfs's cleaner then works through a root whose blocks the
	// sandbox's snapshots share, stalling every snapshot's commit for
	// about another second. So it waits for a quiet pool (an agent's
	// thinking time), within bounds (see oldRootDrops).
	s.pool.oldRoots.whenQuiet(spec.ID, func() { s.dropOldRoot(ctx, spec.ID, scratch) })
	release, err := s.launch.admit(ctx)
	if err != nil {
		return err
	}
	defer release()
	t2 := time.Now()
	if _, err := s.launch.start(ctx, spec, s.pool.st.Path(sandboxKey(spec.ID)), conn); err != nil {
		return err
	}
	t3 := time.Now()
	err = s.sockets.waitReady(ctx, conn)
	s.log.Debug("rollback phases", "sandbox", spec.ID, "copy_ms", ms(t1.Sub(t0)), "swap_ms", ms(t2.Sub(t1)),
		"start_ms", ms(t3.Sub(t2)), "ready_ms", ms(time.Since(t3)))
	return err
}

// dropOldRoot deletes the volume a rollback swapped a sandbox's old root
// into. A failure leaves it to the next start's reconcile.
func (s *snapshots) dropOldRoot(ctx context.Context, id string, old storage.Key) {
	began := time.Now()
	del := s.pool.st.Delete
	if a, ok := s.pool.st.(storage.AsideDeleter); ok {
		// Out of scratch/ first: the next rollback's copy goes there.
		del = a.DeleteAside
	}
	if err := del(ctx, old); err != nil && !errdefs.IsNotFound(err) {
		s.log.Warn("drop the old root of a rolled-back sandbox", "sandbox", id, "volume", old.String(), "err", err)
		return
	}
	s.log.Debug("dropped the old root of a rolled-back sandbox", "sandbox", id, "took", time.Since(began))
}

// Diff lists what differs between two volumes: snapshots, or a snapshot
// and a sandbox's live tree (to = "live:<sandbox id>").
func (s *snapshots) Diff(ctx context.Context, from string, to string, toLive bool) ([]storage.Change, error) {
	d, ok := s.pool.st.(storage.Differ)
	if !ok {
		return nil, fmt.Errorf("the %s storage cannot diff: %w", s.pool.st.Name(), errdefs.ErrUnsupported)
	}
	if err := s.pool.unsettled.snapshot(ctx, from); err != nil {
		return nil, err
	}
	toKey := snapshotKey(to)
	if toLive {
		toKey = sandboxKey(to)
	} else if err := s.pool.unsettled.snapshot(ctx, to); err != nil {
		return nil, err
	}
	changes, err := d.Diff(ctx, snapshotKey(from), toKey)
	if err != nil {
		return nil, err
	}
	return changes, nil
}

// ReadVolumeFile reads a small regular file from a snapshot (or a live
// sandbox when live) for content diffs. It never follows a symlink out of the
// volume (openat2 RESOLVE_IN_ROOT) and reads at most limit bytes; ok is false
// when the path is not a regular file or is larger.
func (s *snapshots) ReadVolumeFile(id string, live bool, path string, limit int64) (data []byte, ok bool, err error) {
	key := snapshotKey(id)
	if live {
		key = sandboxKey(id)
	} else if err := s.pool.unsettled.snapshot(context.Background(), id); err != nil {
		return nil, false, err
	}
	root, err := os.Open(s.pool.st.Path(key))
	if err != nil {
		return nil, false, err
	}
	defer root.Close()
	fd, err := unix.Openat2(int(root.Fd()), path, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOFOLLOW | unix.O_NONBLOCK,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	})
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ELOOP) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, false, err
	}
	if !st.Mode().IsRegular() || st.Size() > limit {
		return nil, false, nil
	}
	buf := make([]byte, st.Size())
	n, err := f.ReadAt(buf, 0)
	if err != nil && n != len(buf) {
		return nil, false, err
	}
	return buf[:n], true, nil
}

// ReconcileSnapshots deletes every snapshot volume keep does not name.
func (s *snapshots) ReconcileSnapshots(ctx context.Context, keep map[string]bool) error {
	vols, err := s.pool.st.List(ctx, storage.KindSnapshot)
	if err != nil {
		return fmt.Errorf("list snapshot volumes: %w", err)
	}
	var errs []error
	for _, v := range vols {
		if keep[v.Key.Name] {
			continue
		}
		s.log.Info("removing snapshot volume no record names", "snapshot", v.Key.Name)
		if err := s.pool.st.Delete(ctx, v.Key); err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	errs = append(errs, s.images.reconcile(s.log, keep, nil))
	return errors.Join(errs...)
}

// HasSnapshot reports whether a snapshot's volume exists.
func (s *snapshots) HasSnapshot(ctx context.Context, snapID string) bool {
	if s.pool.unsettled.snapshot(ctx, snapID) != nil {
		return false
	}
	_, err := s.pool.st.Stat(ctx, snapshotKey(snapID))
	return err == nil
}

// GroupUsage reports the space charged to a quota group and its limit.
func (s *snapshots) GroupUsage(ctx context.Context, group string) (used, limit int64, err error) {
	q, ok := s.pool.st.(storage.QuotaGroups)
	if !ok {
		return -1, 0, fmt.Errorf("the %s storage does not account space: %w", s.pool.st.Name(), errdefs.ErrUnsupported)
	}
	return q.GroupUsage(ctx, group)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
