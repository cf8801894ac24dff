package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/agentconn"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
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

func sandboxKey(id string) storage.Key  { return storage.Key{Kind: storage.KindSandbox, Name: id} }
func snapshotKey(id string) storage.Key { return storage.Key{Kind: storage.KindSnapshot, Name: id} }

// Snapshot takes a read-only snapshot of a sandbox's whole root filesystem.
// Dirty data is written back first, so that the processes are frozen only
// for the instant of the snapshot itself; the frozen state is consistent
// (no process is mid-way through a multi-file write while the tree is
// captured).
//
// With settled set, Snapshot returns as soon as the snapshot's content is
// fixed, where the storage can tell (on btrfs: once the commit has copied
// the tree, before it is written out, which is a quarter of a turn's
// time). The rest is written in the background; every operation on the
// snapshot or on the sandbox's volume waits for it (unsettledSnapshots),
// and settled gets the outcome: the volume's info, or the error that lost
// it (the filesystem failing its commit). A daemon killed meanwhile loses
// nothing: the kernel finishes the call. A host that loses power does lose it, as
// it loses the sandbox's writes since the last commit; start-up reconciles
// the record away. Without settled, or where the storage cannot tell,
// Snapshot returns once the snapshot is written and settled is not called.
func (h *Host) Snapshot(ctx context.Context, id, snapID, group string, settled func(storage.Info, error)) (SnapshotResult, error) {
	// One snapshot of a sandbox in flight at a time, the last one written
	// before the next begins (unsettledSnapshots tracks one per sandbox).
	if err := h.unsettled.sandbox(ctx, id); err != nil {
		return SnapshotResult{}, err
	}
	// The write-back is shared by every snapshot waiting for one; the
	// snapshots themselves are serialised host-wide (btrfs commits them
	// one at a time anyway).
	syncStart := time.Now()
	if err := h.writeBackBeforeSnapshot(ctx, id); err != nil {
		h.Log.Debug("write back before snapshot", "sandbox", id, "err", err)
	}
	synced := time.Since(syncStart)
	h.snapMu.Lock()
	canFreeze := h.Runtime.Capabilities().Pause
	start := time.Now()
	if canFreeze {
		if err := h.Runtime.Pause(ctx, id); err != nil {
			h.snapMu.Unlock()
			return SnapshotResult{}, fmt.Errorf("freeze sandbox %s: %w", id, err)
		}
	}
	paused := time.Now()
	// Thaw as soon as the snapshot's content is fixed (Taken), not when
	// the snapshot has been written out: on btrfs that is most of the call.
	var (
		thawOnce sync.Once
		frozen   time.Duration
		rerr     error
	)
	thaw := func() {
		thawOnce.Do(func() {
			if canFreeze {
				rerr = h.Runtime.Resume(context.WithoutCancel(ctx), id)
			}
			frozen = time.Since(start)
			// The next snapshot may start while this one is written out.
			h.snapMu.Unlock()
		})
	}
	st := h.unsettled.begin(id, snapID)
	taken := make(chan struct{})
	written := make(chan error, 1)
	go func() {
		_, err := h.snapshotVolume(context.WithoutCancel(ctx), sandboxKey(id), snapshotKey(snapID), storage.SnapshotOptions{
			ReadOnly: true, Group: group,
			Taken: func() { thaw(); close(taken) },
		})
		written <- err
	}()
	// finish completes the call once the snapshot is written, and
	// releases whatever waits for it; it runs here, or in the background
	// when the answer went out at Taken.
	finish := func(serr error, early bool) (storage.Info, error) {
		took := time.Since(paused)
		thaw()
		h.Log.Debug("snapshot frozen phases", "sandbox", id, "pause", paused.Sub(start), "ioctl", took, "frozen", frozen, "thawed_early", early)
		if rerr != nil {
			// The snapshot is good; the sandbox staying frozen is the
			// problem.
			h.Log.Error("thaw sandbox after snapshot", "sandbox", id, "err", rerr)
		}
		var info storage.Info
		err := serr
		if err != nil {
			err = fmt.Errorf("snapshot sandbox %s: %w", id, err)
		} else {
			info, err = h.Storage.Stat(context.WithoutCancel(ctx), snapshotKey(snapID))
		}
		h.unsettled.end(st, err)
		return info, err
	}
	var (
		serr  error
		early bool
	)
	select {
	case <-taken:
		if settled != nil {
			go func() {
				info, err := finish(<-written, true)
				if err != nil {
					h.Log.Error("snapshot lost after its content was fixed", "sandbox", id, "snapshot", snapID, "err", err)
				}
				settled(info, err)
				h.unsettled.finished(st)
			}()
			info := storage.Info{Key: snapshotKey(snapID), Path: h.Storage.Path(snapshotKey(snapID)), ReadOnly: true, ExclusiveBytes: -1, ReferencedBytes: -1}
			return SnapshotResult{Info: info, Frozen: frozen, Synced: synced, Settling: true}, nil
		}
		serr, early = <-written, true
	case serr = <-written:
	}
	info, err := finish(serr, early)
	h.unsettled.finished(st)
	return SnapshotResult{Info: info, Frozen: frozen, Synced: synced}, err
}

// SnapshotStopped takes a read-only snapshot of a stopped sandbox's kept
// tree. Nothing runs in it, so there is nothing to freeze; the snapshot
// ioctl writes back whatever its killed processes left unwritten.
func (h *Host) SnapshotStopped(ctx context.Context, id, snapID, group string) (SnapshotResult, error) {
	if err := h.unsettled.sandbox(ctx, id); err != nil {
		return SnapshotResult{}, err
	}
	if _, err := h.snapshotVolume(context.WithoutCancel(ctx), sandboxKey(id), snapshotKey(snapID), storage.SnapshotOptions{ReadOnly: true, Group: group}); err != nil {
		return SnapshotResult{}, fmt.Errorf("snapshot stopped sandbox %s: %w", id, err)
	}
	info, err := h.Storage.Stat(context.WithoutCancel(ctx), snapshotKey(snapID))
	return SnapshotResult{Info: info}, err
}

// syncVolume writes back a volume's dirty data: syncfs on the filesystem
// holding it, shared with the other snapshots waiting for one (every volume
// is in the one pool).
func (h *Host) syncVolume(key storage.Key) error { return h.syncVolumeFrom(h.syncs.next(), key) }

// syncVolumeFrom is syncVolume served by write-back number ticket or a
// later one (groupSync.doFrom).
func (h *Host) syncVolumeFrom(ticket uint64, key storage.Key) error {
	f, err := os.Open(h.Storage.Path(key))
	if err != nil {
		return err
	}
	defer f.Close()
	return h.syncs.doFrom(ticket, func() error { return unix.Syncfs(int(f.Fd())) })
}

// DeleteSnapshot removes a snapshot's volume. A missing volume is not an
// error.
func (h *Host) DeleteSnapshot(ctx context.Context, snapID string) error {
	// Even a snapshot that failed to commit: its call must be over.
	_ = h.unsettled.snapshot(context.WithoutCancel(ctx), snapID)
	if h.MemoryDir != "" {
		if err := removeMemoryImage(h.snapshotImage(snapID)); err != nil {
			return err
		}
	}
	err := h.Storage.Delete(context.WithoutCancel(ctx), snapshotKey(snapID))
	if errdefs.IsNotFound(err) {
		return nil
	}
	return err
}

// SnapshotInfo describes a snapshot's volume (sizes included).
func (h *Host) SnapshotInfo(ctx context.Context, snapID string) (storage.Info, error) {
	if err := h.unsettled.snapshot(ctx, snapID); err != nil {
		return storage.Info{}, err
	}
	return h.Storage.Stat(ctx, snapshotKey(snapID))
}

// Rollback replaces a sandbox's root filesystem with a writable copy of a
// snapshot and restarts its processes (a bind-mounted subvolume cannot be
// swapped under running processes). The sandbox keeps its id, its agent
// socket and its limits. On error the sandbox is left stopped; the caller
// marks it failed.
func (h *Host) Rollback(ctx context.Context, spec Spec, snapID string, conn *agentconn.Conn) error {
	ctx = context.WithoutCancel(ctx)
	if err := h.unsettled.snapshot(ctx, snapID); err != nil {
		return err
	}
	if err := h.unsettled.sandbox(ctx, spec.ID); err != nil {
		return err
	}
	if _, err := h.Storage.Stat(ctx, snapshotKey(snapID)); err != nil {
		return fmt.Errorf("snapshot %s: %w", snapID, err)
	}
	if err := h.Runtime.Destroy(ctx, spec.ID); err != nil && !errdefs.IsNotFound(err) {
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
	if _, err := h.snapshotVolume(ctx, snapshotKey(snapID), scratch, storage.SnapshotOptions{Group: spec.Group}); err != nil {
		return fmt.Errorf("copy snapshot %s: %w", snapID, err)
	}
	t1 := time.Now()
	err := h.Storage.Exchange(ctx, scratch, sandboxKey(spec.ID))
	if errdefs.IsNotFound(err) {
		// No old root (a crash took it): put the copy in place.
		if _, err = h.snapshotVolume(ctx, scratch, sandboxKey(spec.ID), storage.SnapshotOptions{Group: spec.Group}); err != nil {
			err = fmt.Errorf("install new root of %s: %w", spec.ID, err)
		}
	}
	if err != nil {
		if derr := h.Storage.Delete(ctx, scratch); derr != nil {
			h.Log.Warn("remove rollback scratch volume", "volume", scratch.String(), "err", derr)
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
	h.oldRoots.whenQuiet(spec.ID, func() { h.dropOldRoot(ctx, spec.ID, scratch) })
	t2 := time.Now()
	if _, err := h.start(ctx, spec, h.Storage.Path(sandboxKey(spec.ID))); err != nil {
		return err
	}
	t3 := time.Now()
	err = h.waitReady(ctx, conn)
	h.Log.Debug("rollback phases", "sandbox", spec.ID, "copy_ms", ms(t1.Sub(t0)), "swap_ms", ms(t2.Sub(t1)),
		"start_ms", ms(t3.Sub(t2)), "ready_ms", ms(time.Since(t3)))
	return err
}

// dropOldRoot deletes the volume a rollback swapped a sandbox's old root
// into. A failure leaves it to the next start's reconcile.
func (h *Host) dropOldRoot(ctx context.Context, id string, old storage.Key) {
	began := time.Now()
	if err := h.Storage.Delete(ctx, old); err != nil && !errdefs.IsNotFound(err) {
		h.Log.Warn("drop the old root of a rolled-back sandbox", "sandbox", id, "volume", old.String(), "err", err)
		return
	}
	h.Log.Debug("dropped the old root of a rolled-back sandbox", "sandbox", id, "took", time.Since(began))
}

// Diff lists what differs between two volumes: snapshots, or a snapshot
// and a sandbox's live tree (to = "live:<sandbox id>").
func (h *Host) Diff(ctx context.Context, from string, to string, toLive bool) ([]storage.Change, error) {
	d, ok := h.Storage.(storage.Differ)
	if !ok {
		return nil, fmt.Errorf("the %s storage cannot diff: %w", h.Storage.Name(), errdefs.ErrUnsupported)
	}
	if err := h.unsettled.snapshot(ctx, from); err != nil {
		return nil, err
	}
	toKey := snapshotKey(to)
	if toLive {
		toKey = sandboxKey(to)
	} else if err := h.unsettled.snapshot(ctx, to); err != nil {
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
func (h *Host) ReadVolumeFile(id string, live bool, path string, limit int64) (data []byte, ok bool, err error) {
	key := snapshotKey(id)
	if live {
		key = sandboxKey(id)
	} else if err := h.unsettled.snapshot(context.Background(), id); err != nil {
		return nil, false, err
	}
	root, err := os.Open(h.Storage.Path(key))
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
func (h *Host) ReconcileSnapshots(ctx context.Context, keep map[string]bool) error {
	vols, err := h.Storage.List(ctx, storage.KindSnapshot)
	if err != nil {
		return fmt.Errorf("list snapshot volumes: %w", err)
	}
	var errs []error
	for _, v := range vols {
		if keep[v.Key.Name] {
			continue
		}
		h.Log.Info("removing snapshot volume no record names", "snapshot", v.Key.Name)
		if err := h.Storage.Delete(ctx, v.Key); err != nil && !errdefs.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	errs = append(errs, h.reconcileMemory(keep, nil))
	return errors.Join(errs...)
}

// HasSnapshot reports whether a snapshot's volume exists.
func (h *Host) HasSnapshot(ctx context.Context, snapID string) bool {
	if h.unsettled.snapshot(ctx, snapID) != nil {
		return false
	}
	_, err := h.Storage.Stat(ctx, snapshotKey(snapID))
	return err == nil
}

// GroupUsage reports the space charged to a quota group and its limit.
func (h *Host) GroupUsage(ctx context.Context, group string) (used, limit int64, err error) {
	q, ok := h.Storage.(storage.QuotaGroups)
	if !ok {
		return -1, 0, fmt.Errorf("the %s storage does not account space: %w", h.Storage.Name(), errdefs.ErrUnsupported)
	}
	return q.GroupUsage(ctx, group)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
