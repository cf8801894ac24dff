package sandbox

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/warrenhq/warren/internal/storage"
)

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
func (s *snapshots) Snapshot(ctx context.Context, id, snapID, group string, settled func(storage.Info, error)) (SnapshotResult, error) {
	// One snapshot of a sandbox in flight at a time, the last one written
	// before the next begins (unsettledSnapshots tracks one per sandbox).
	if err := s.pool.unsettled.sandbox(ctx, id); err != nil {
		return SnapshotResult{}, err
	}
	// The write-back is shared by every snapshot waiting for one; the
	// snapshots themselves are serialised host-wide (btrfs commits them
	// one at a time anyway).
	syncStart := time.Now()
	if err := s.writeBacks.writeBackBeforeSnapshot(ctx, id); err != nil {
		s.log.Debug("write back before snapshot", "sandbox", id, "err", err)
	}
	synced := time.Since(syncStart)
	f, err := s.freeze(ctx, id, snapID)
	if err != nil {
		return SnapshotResult{}, err
	}
	f.synced = synced
	f.write(group)
	return f.await(settled)
}

// frozenSnapshot is one Snapshot call from the freeze on: the sandbox
// frozen (where the runtime can), the snapshot written in the background,
// the thaw as soon as its content is fixed, and the finish once it is
// written, here or in the background.
type frozenSnapshot struct {
	pool    *volumes
	runtime snapshotRuntime
	log     *slog.Logger
	// ctx is the call's, uncancelled: a snapshot begun is seen through.
	ctx           context.Context
	id, snapID    string
	canFreeze     bool
	start, paused time.Time     // the freeze asked for, and done
	synced        time.Duration // the write-back before the freeze
	st            *settle
	taken         chan struct{} // closed once the content is fixed (thawed)
	written       chan error    // the snapshot's outcome

	thawOnce sync.Once
	frozen   time.Duration // how long the sandbox stayed frozen; set by thaw
	thawErr  error
}

// freeze takes the host's snapshot lock (held until thaw) and freezes
// sandbox id, where the runtime can.
func (s *snapshots) freeze(ctx context.Context, id, snapID string) (*frozenSnapshot, error) {
	s.pool.snapMu.Lock()
	f := &frozenSnapshot{pool: s.pool, runtime: s.runtime, log: s.log, ctx: context.WithoutCancel(ctx),
		id: id, snapID: snapID, canFreeze: s.runtime.Capabilities().Pause,
		taken: make(chan struct{}), written: make(chan error, 1)}
	f.start = time.Now()
	if f.canFreeze {
		if err := s.runtime.Pause(ctx, id); err != nil {
			s.pool.snapMu.Unlock()
			return nil, fmt.Errorf("freeze sandbox %s: %w", id, err)
		}
	}
	f.paused = time.Now()
	return f, nil
}

// thaw thaws the sandbox as soon as the snapshot's content is fixed
// (Taken), not when the snapshot has been written out: on btrfs that is
// most of the call. It runs once, whichever comes first.
func (f *frozenSnapshot) thaw() {
	f.thawOnce.Do(func() {
		if f.canFreeze {
			f.thawErr = f.runtime.Resume(f.ctx, f.id)
		}
		f.frozen = time.Since(f.start)
		// The next snapshot may start while this one is written out.
		f.pool.snapMu.Unlock()
	})
}

// write starts writing the snapshot in the background: taken closes at
// Taken, written gets the outcome.
func (f *frozenSnapshot) write(group string) {
	f.st = f.pool.unsettled.begin(f.id, f.snapID)
	go func() {
		_, err := f.pool.snapshotVolume(f.ctx, sandboxKey(f.id), snapshotKey(f.snapID), storage.SnapshotOptions{
			ReadOnly: true, Group: group,
			Taken: func() { f.thaw(); close(f.taken) },
		})
		f.written <- err
	}()
}

// await answers the call: at Taken when settled is set (the rest is
// finished in the background), else once the snapshot is written.
func (f *frozenSnapshot) await(settled func(storage.Info, error)) (SnapshotResult, error) {
	var (
		serr  error
		early bool
	)
	select {
	case <-f.taken:
		if settled != nil {
			go f.settleInBackground(settled)
			info := storage.Info{Key: snapshotKey(f.snapID), Path: f.pool.st.Path(snapshotKey(f.snapID)), ReadOnly: true, ExclusiveBytes: -1, ReferencedBytes: -1}
			return SnapshotResult{Info: info, Frozen: f.frozen, Synced: f.synced, Settling: true}, nil
		}
		serr, early = <-f.written, true
	case serr = <-f.written:
	}
	info, err := f.finish(serr, early)
	f.pool.unsettled.finished(f.st)
	return SnapshotResult{Info: info, Frozen: f.frozen, Synced: f.synced}, err
}

// settleInBackground finishes a snapshot whose answer went out at Taken
// and hands settled the outcome.
func (f *frozenSnapshot) settleInBackground(settled func(storage.Info, error)) {
	info, err := f.finish(<-f.written, true)
	if err != nil {
		f.log.Error("snapshot lost after its content was fixed", "sandbox", f.id, "snapshot", f.snapID, "err", err)
	}
	settled(info, err)
	f.pool.unsettled.finished(f.st)
}

// finish completes the call once the snapshot is written, and releases
// whatever waits for it.
func (f *frozenSnapshot) finish(serr error, early bool) (storage.Info, error) {
	took := time.Since(f.paused)
	f.thaw()
	f.log.Debug("snapshot frozen phases", "sandbox", f.id, "pause", f.paused.Sub(f.start), "ioctl", took, "frozen", f.frozen, "thawed_early", early)
	if f.thawErr != nil {
		// The snapshot is good; the sandbox staying frozen is the
		// problem.
		f.log.Error("thaw sandbox after snapshot", "sandbox", f.id, "err", f.thawErr)
	}
	var info storage.Info
	err := serr
	if err != nil {
		err = fmt.Errorf("snapshot sandbox %s: %w", f.id, err)
	} else {
		info, err = f.pool.st.Stat(f.ctx, snapshotKey(f.snapID))
	}
	f.pool.unsettled.end(f.st, err)
	return info, err
}
