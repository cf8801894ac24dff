package session

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/store"
)

// Archiving keeps a long turn history cheap. A btrfs snapshot costs more
// the more snapshots of the same lineage the pool holds, so old turns leave
// the pool: each becomes a stream file, an incremental send against an
// "anchor" turn that stays (turn 1, AnchorEvery+1, 2·AnchorEvery+1, …), and
// comes back on demand when an operation needs its volume.
//
//	creating ──► ready ──(archiver)──► archived
//	               ▲                      │
//	               └──(restore on use)────┘
//	ready, archived ──(delete)──► deleted
//
// A restored snapshot keeps its stream: both volumes are read-only, so the
// stream stays valid and archiving it again only drops the volume.
//
// Locks: a snapshot's volume is used under its read lock (useSnapshot);
// moving it in or out of the pool and deleting it take the write lock. When
// one operation holds two snapshots' locks it takes the newer first (an
// archived turn is newer than its anchor), so no two operations wait on
// each other.

// SnapArchived is the state of a snapshot whose volume is a stream file.
const SnapArchived = store.SnapshotState("archived")

// Archiving defaults.
const (
	DefaultArchiveAfter = 32
	DefaultAnchorEvery  = 100
	// archiveInterval spaces archives: a send reads the volume and competes
	// with sandboxes for the disk.
	archiveInterval = 50 * time.Millisecond
)

// usableStates are the states of a snapshot whose tree can still be had.
var usableStates = []store.SnapshotState{SnapReady, SnapArchived}

type snapLock struct {
	mu   sync.RWMutex
	refs int
}

// lockSnapshot takes a snapshot's lock (shared or exclusive) and returns
// the unlock.
func (m *Manager) lockSnapshot(id string, exclusive bool) func() {
	m.mu.Lock()
	l := m.snapLocks[id]
	if l == nil {
		l = &snapLock{}
		m.snapLocks[id] = l
	}
	l.refs++
	m.mu.Unlock()
	if exclusive {
		l.mu.Lock()
	} else {
		l.mu.RLock()
	}
	return func() {
		if exclusive {
			l.mu.Unlock()
		} else {
			l.mu.RUnlock()
		}
		m.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(m.snapLocks, id)
		}
		m.mu.Unlock()
	}
}

func (m *Manager) archiving() bool {
	return m.cfg.ArchiveAfter > 0 && m.host.CanArchive()
}

// usableSnapshot returns a team's snapshot whose tree can be used (ready,
// or archived and restorable).
func (m *Manager) usableSnapshot(ctx context.Context, team, snapID string) (store.Snapshot, error) {
	snap, err := m.GetSnapshot(ctx, team, snapID)
	if err != nil {
		return store.Snapshot{}, err
	}
	if !slices.Contains(usableStates, snap.State) {
		return store.Snapshot{}, fmt.Errorf("snapshot %s is %s: %w", snapID, snap.State, errdefs.ErrNotFound)
	}
	return snap, nil
}

// useSnapshots makes sure the snapshots' volumes are in the pool (restoring
// archived ones) and keeps them there until release is called.
func (m *Manager) useSnapshots(ctx context.Context, snaps ...store.Snapshot) (release func(), err error) {
	// Newest first, each once (see the lock order above).
	slices.SortFunc(snaps, func(a, b store.Snapshot) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return cmpString(b.ID, a.ID)
	})
	snaps = slices.CompactFunc(snaps, func(a, b store.Snapshot) bool { return a.ID == b.ID })
	var held []func()
	release = func() {
		for i := len(held) - 1; i >= 0; i-- {
			held[i]()
		}
	}
	for _, s := range snaps {
		unlock, err := m.useSnapshot(ctx, s.ID)
		if err != nil {
			release()
			return nil, err
		}
		held = append(held, unlock)
	}
	return release, nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// useSnapshot takes a snapshot's shared lock once its volume is in the
// pool, restoring it first if it is archived.
func (m *Manager) useSnapshot(ctx context.Context, id string) (func(), error) {
	for range 3 {
		unlock := m.lockSnapshot(id, false)
		snap, err := m.store.GetSnapshot(ctx, id)
		if err == nil && snap.State == SnapReady {
			return unlock, nil
		}
		unlock()
		if err != nil {
			return nil, err
		}
		if snap.State != SnapArchived {
			return nil, fmt.Errorf("snapshot %s is %s: %w", id, snap.State, errdefs.ErrNotFound)
		}
		unlock = m.lockSnapshot(id, true)
		err = m.restoreLocked(ctx, id)
		unlock()
		if err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("snapshot %s keeps being archived while in use; try again: %w", id, errdefs.ErrConflict)
}

// restoreLocked brings an archived snapshot's volume back into the pool and
// marks it ready. The caller holds the snapshot's exclusive lock.
func (m *Manager) restoreLocked(ctx context.Context, id string) error {
	ctx = context.WithoutCancel(ctx)
	snap, err := m.store.GetSnapshot(ctx, id)
	if err != nil {
		return err
	}
	if snap.State != SnapArchived {
		return nil // restored (or deleted) meanwhile; the caller looks again
	}
	start := time.Now()
	if !m.host.HasSnapshot(ctx, id) {
		if err := m.host.RestoreSnapshot(ctx, id, snap.ArchiveParent, snap.ArchivePath); err != nil {
			return fmt.Errorf("restore archived snapshot %s: %w", id, err)
		}
	}
	if err := m.store.UpdateSnapshotState(ctx, id, []store.SnapshotState{SnapArchived}, SnapReady); err != nil {
		return err
	}
	m.log.Info("restored archived snapshot", "snapshot", id, "took", time.Since(start))
	return nil
}

// dropSnapshot tombstones a ready or archived snapshot and frees its volume
// and stream. An anchor that archived snapshots are deltas against is
// refused: they could not be restored without it.
func (m *Manager) dropSnapshot(ctx context.Context, id string) error {
	ctx = context.WithoutCancel(ctx)
	unlock := m.lockSnapshot(id, true)
	defer unlock()
	snap, err := m.store.GetSnapshot(ctx, id)
	if err != nil {
		return err
	}
	if n, err := m.store.CountArchivedOn(ctx, id); err != nil {
		return err
	} else if n > 0 {
		return fmt.Errorf("snapshot %s is the anchor of %d archived snapshot(s), which cannot be restored without it; delete those first: %w", id, n, errdefs.ErrConflict)
	}
	if err := m.store.UpdateSnapshotState(ctx, id, usableStates, SnapDeleted); err != nil {
		return err
	}
	if snap.State == SnapReady {
		m.deleteVolumeLater(id)
	}
	if snap.ArchivePath != "" {
		if err := m.host.RemoveArchive(snap.ArchivePath); err != nil {
			m.log.Warn("remove archive stream", "snapshot", id, "err", err)
		}
	}
	return nil
}

// archiveLater asks the archiver to look at a sandbox's turns.
func (m *Manager) archiveLater(sandboxID string) {
	if !m.archiving() {
		return
	}
	m.mu.Lock()
	if m.archivePending[sandboxID] {
		m.mu.Unlock()
		return
	}
	m.archivePending[sandboxID] = true
	m.mu.Unlock()
	select {
	case m.archiveQ <- sandboxID:
	default:
		// Full: a later turn of the sandbox asks again.
		m.mu.Lock()
		delete(m.archivePending, sandboxID)
		m.mu.Unlock()
	}
}

// runArchiver archives old turns, one at a time host-wide, until ctx ends.
// It starts with every sandbox that has turns (work a previous daemon left).
func (m *Manager) runArchiver(ctx context.Context) {
	if !m.archiving() {
		return
	}
	turns, err := m.store.ListSnapshots(ctx, store.SnapshotFilter{Kinds: []store.SnapshotKind{KindTurn},
		States: []store.SnapshotState{SnapReady}})
	if err != nil {
		m.log.Warn("list turns to archive", "err", err)
	}
	seen := map[string]bool{}
	for _, t := range turns {
		if !seen[t.SandboxID] {
			seen[t.SandboxID] = true
			m.archiveLater(t.SandboxID)
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case id := <-m.archiveQ:
			m.mu.Lock()
			delete(m.archivePending, id)
			m.mu.Unlock()
			m.archiveSandbox(ctx, id)
		}
	}
}

// archiveJob is one turn to archive and the anchor its stream is a delta
// against.
type archiveJob struct {
	snap, anchor store.Snapshot
}

// planArchive picks the turns of one sandbox to archive. turns are its
// ready and archived turn snapshots. The newest keep turns stay; anchors
// (turn ≡ 1 mod every) stay; turns with forks stay; the rest are archived
// against the newest ready anchor below them, and stay when there is none.
func planArchive(turns []store.Snapshot, keep, every int, forked func(id string) bool) []archiveJob {
	if keep <= 0 || every <= 0 || len(turns) <= keep {
		return nil
	}
	turns = slices.Clone(turns)
	slices.SortFunc(turns, func(a, b store.Snapshot) int { return a.Turn - b.Turn })
	old := len(turns) - keep
	var jobs []archiveJob
	var anchor *store.Snapshot
	for i := range turns[:old] {
		t := &turns[i]
		if isAnchor(t.Turn, every) {
			if t.State == SnapReady {
				anchor = t
			}
			continue
		}
		if t.State != SnapReady || anchor == nil || forked(t.ID) {
			continue
		}
		jobs = append(jobs, archiveJob{snap: *t, anchor: *anchor})
	}
	return jobs
}

func isAnchor(turn, every int) bool { return turn%every == 1%every }

// archiveSandbox archives what planArchive picks for one sandbox.
func (m *Manager) archiveSandbox(ctx context.Context, sandboxID string) {
	turns, err := m.store.ListSnapshots(ctx, store.SnapshotFilter{SandboxID: sandboxID,
		Kinds: []store.SnapshotKind{KindTurn}, States: usableStates})
	if err != nil {
		m.log.Warn("list turns to archive", "sandbox", sandboxID, "err", err)
		return
	}
	forked := func(id string) bool {
		n, err := m.store.CountForksOf(ctx, id)
		return err != nil || n > 0
	}
	for _, job := range planArchive(turns, m.cfg.ArchiveAfter, m.cfg.AnchorEvery, forked) {
		if ctx.Err() != nil {
			return
		}
		if err := m.archiveOne(ctx, job); err != nil {
			m.log.Warn("archive turn snapshot", "snapshot", job.snap.ID, "anchor", job.anchor.ID, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(archiveInterval):
		}
	}
}

// archiveOne writes a turn's stream (while the volume stays usable), then
// records it and drops the volume under the turn's exclusive lock.
func (m *Manager) archiveOne(ctx context.Context, job archiveJob) error {
	ctx = context.WithoutCancel(ctx)
	id, anchorID := job.snap.ID, job.anchor.ID
	unlockSnap := m.lockSnapshot(id, false)
	unlockAnchor := m.lockSnapshot(anchorID, false)
	snap, err := m.store.GetSnapshot(ctx, id)
	if err == nil && snap.State != SnapReady {
		err = fmt.Errorf("snapshot %s is %s now: %w", id, snap.State, errdefs.ErrConflict)
	}
	anchor, aerr := m.store.GetSnapshot(ctx, anchorID)
	if err == nil && aerr == nil && anchor.State != SnapReady {
		aerr = fmt.Errorf("anchor %s is %s now: %w", anchorID, anchor.State, errdefs.ErrConflict)
	}
	if err == nil {
		err = aerr
	}
	path := snap.ArchivePath
	start := time.Now()
	reused := err == nil && snap.ArchiveParent == anchorID && m.host.HasArchive(path)
	if err == nil && !reused {
		path, err = m.host.ArchiveSnapshot(ctx, id, anchorID)
	}
	sent := time.Since(start)
	unlockAnchor()
	unlockSnap()
	if err != nil {
		return err
	}

	unlockSnap = m.lockSnapshot(id, true)
	defer unlockSnap()
	unlockAnchor = m.lockSnapshot(anchorID, false)
	defer unlockAnchor()
	snap, err = m.store.GetSnapshot(ctx, id)
	if err != nil {
		return err
	}
	anchor, err = m.store.GetSnapshot(ctx, anchorID)
	if err != nil {
		return err
	}
	if snap.State != SnapReady || anchor.State != SnapReady {
		// Deleted meanwhile: a deleted snapshot's stream is garbage, and so
		// is a stream against a deleted anchor.
		if snap.State == SnapReady && snap.ArchivePath == path {
			_ = m.store.SetSnapshotArchive(ctx, id, "", "")
		}
		_ = m.host.RemoveArchive(path)
		return fmt.Errorf("snapshot %s (%s) or anchor %s (%s) changed state while archiving: %w", id, snap.State, anchorID, anchor.State, errdefs.ErrConflict)
	}
	if err := m.store.SetSnapshotArchive(ctx, id, anchorID, path); err != nil {
		return err
	}
	if err := m.store.UpdateSnapshotState(ctx, id, []store.SnapshotState{SnapReady}, SnapArchived); err != nil {
		return err
	}
	if err := m.host.DeleteSnapshot(ctx, id); err != nil {
		// The volume stays: keep the snapshot ready (its stream with it).
		if uerr := m.store.UpdateSnapshotState(ctx, id, []store.SnapshotState{SnapArchived}, SnapReady); uerr != nil {
			m.log.Warn("undo archive", "snapshot", id, "err", uerr)
		}
		return fmt.Errorf("drop the volume of archived snapshot %s: %w", id, err)
	}
	m.log.Debug("archived turn snapshot", "snapshot", id, "turn", snap.Turn, "anchor", anchorID, "send", sent, "reused", reused)
	return nil
}

// recoverArchive settles one snapshot record against what is on disk after
// a restart; it reports whether the volume and the stream are to be kept.
func (m *Manager) recoverArchive(ctx context.Context, s store.Snapshot) (keepVolume, keepStream bool) {
	hasVol := m.host.HasSnapshot(ctx, s.ID)
	hasStream := s.ArchivePath != "" && m.host.HasArchive(s.ArchivePath)
	switch {
	case s.State == SnapArchived && hasVol:
		// The daemon died between recording the archive and dropping the
		// volume, or between a restore and its record. The volume is whole
		// either way (it is put in place atomically): use it.
		if err := m.store.UpdateSnapshotState(ctx, s.ID, []store.SnapshotState{SnapArchived}, SnapReady); err != nil {
			m.log.Warn("mark restored snapshot ready", "snapshot", s.ID, "err", err)
		}
		return true, hasStream
	case s.State == SnapArchived && hasStream:
		return false, true
	case s.State == SnapArchived:
		m.log.Warn("archive stream missing; keeping a tombstone", "snapshot", s.ID, "path", s.ArchivePath)
		_ = m.store.UpdateSnapshotState(ctx, s.ID, []store.SnapshotState{SnapArchived}, SnapDeleted)
		return false, false
	case hasVol:
		if s.ArchivePath != "" && !hasStream {
			_ = m.store.SetSnapshotArchive(ctx, s.ID, "", "")
		}
		return true, hasStream
	case hasStream:
		// The volume went but the stream is there: the snapshot lives on,
		// archived.
		m.log.Info("snapshot volume missing but archived; marking it archived", "snapshot", s.ID)
		_ = m.store.UpdateSnapshotState(ctx, s.ID, []store.SnapshotState{SnapReady}, SnapArchived)
		return false, true
	default:
		m.log.Warn("snapshot volume missing; keeping a tombstone", "snapshot", s.ID)
		_ = m.store.UpdateSnapshotState(ctx, s.ID, []store.SnapshotState{SnapReady}, SnapDeleted)
		return false, false
	}
}
