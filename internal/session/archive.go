package session

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/keylock"
	"github.com/warrenhq/warren/internal/store"
)

// archiver keeps snapshot volumes: in use (shared) or moving (exclusive)
// under snapLocks, archived to streams and dropped, restored on demand, and
// deleted in the background.
type archiver struct {
	*registry
	host  archiveHost
	store archiveStore

	deletes chan string // snapshot volumes to delete in the background

	snapLocks keylock.Locks // a snapshot's volume in use (shared) or moving (exclusive)
	archiveQ  chan string   // sandboxes whose turns the archiver should look at
	// queueMu guards archivePending and dropRecheck; nothing is taken
	// under it.
	queueMu        sync.Mutex
	archivePending map[string]bool // sandboxes queued in archiveQ
	dropRecheck    map[string]bool // sandboxes the archiver looks at again after dropIdle
	// archiveMu orders changes to archive chains (streams recorded, volumes
	// dropped, links kept or removed); taken after any snapshot lock.
	archiveMu sync.Mutex
	// chainWalked, when set (by tests), runs after a restore has walked an
	// archive chain and before it locks the base it found.
	chainWalked func(base string)
}

// Archiving keeps a long turn history cheap. A btrfs snapshot costs more
// the more snapshots of the same lineage the pool holds, so old turns leave
// the pool: each becomes a stream file, an incremental send against the turn
// before it (a chain: a turn's stream holds only that turn's changes, so the
// send costs what the turn wrote, tens of ms), and comes back on demand when
// an operation needs its volume. Anchors — turn 1, AnchorEvery+1,
// 2·AnchorEvery+1, … — stay in the pool and bound a chain: a restore replays
// at most AnchorEvery-1 streams, in one receive.
//
//	creating ──► ready ──(archiver)──► archived
//	               ▲                      │
//	               └──(restore on use)────┘
//	ready, archived ──(delete)──► deleted
//
// A turn's volume stays in the pool after its stream is written until the
// next turn's stream is written against it (ready, with a stream). A
// restored snapshot keeps its stream: both volumes are read-only, so the
// stream stays valid and archiving it again only drops the volume.
//
// Deleting a snapshot that archived snapshots are deltas against keeps its
// stream as a link of their chain (deleted, with a stream) and drops it once
// nothing needs it; an anchor, which has no stream, is refused instead.
//
// Locks: a snapshot's volume is used under its read lock (useSnapshot);
// moving it in or out of the pool and deleting it take the write lock. When
// one operation holds two snapshots' locks it takes the newer first (an
// archived turn is newer than the snapshots its chain starts from), so no
// two operations wait on each other.

// SnapArchived is the state of a snapshot whose volume is a stream file.
const SnapArchived = store.SnapshotState("archived")

// Archiving defaults.
const (
	DefaultArchiveAfter = 32
	DefaultAnchorEvery  = 100
	// archiveInterval spaces archives: a send reads the volume and competes
	// with sandboxes for the disk.
	archiveInterval = 50 * time.Millisecond
	// archiveBacklog is how many steps may wait before the archiver stops
	// pausing between them.
	archiveBacklog = 4
	// DefaultDropBatch is how many archived volumes the archiver drops at
	// once. btrfs's cleaner drops them one after another, mostly within the same
	// transactions, and neighbouring turns share most of the reference
	// updates a drop makes (the children of the nodes they both point to),
	// so a batch writes little more than one drop does.
	DefaultDropBatch = 8
	// dropIdle is how long after a sandbox's newest turn the archiver drops
	// what is left over, batch or not.
	dropIdle = 2 * time.Second
)

// usableStates are the states of a snapshot whose tree can still be had.
var usableStates = []store.SnapshotState{SnapReady, SnapArchived}

// lockSnapshot takes a snapshot's lock (shared or exclusive) and returns
// the unlock.
func (a *archiver) lockSnapshot(id string, exclusive bool) func() {
	if exclusive {
		return a.snapLocks.Lock(id)
	}
	return a.snapLocks.RLock(id)
}

func (a *archiver) archiving() bool {
	return a.cfg.ArchiveAfter > 0 && a.host.CanArchive()
}

// usableSnapshot returns a team's snapshot whose tree can be used (ready,
// or archived and restorable).
func (s *snapshots) usableSnapshot(ctx context.Context, team, snapID string) (store.Snapshot, error) {
	snap, err := s.GetSnapshot(ctx, team, snapID)
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
func (a *archiver) useSnapshots(ctx context.Context, snaps ...store.Snapshot) (release func(), err error) {
	// Newest first, each once (see the lock order above).
	slices.SortFunc(snaps, func(x, y store.Snapshot) int {
		if c := y.CreatedAt.Compare(x.CreatedAt); c != 0 {
			return c
		}
		return cmpString(y.ID, x.ID)
	})
	snaps = slices.CompactFunc(snaps, func(x, y store.Snapshot) bool { return x.ID == y.ID })
	var held []func()
	release = func() {
		for i := len(held) - 1; i >= 0; i-- {
			held[i]()
		}
	}
	for _, s := range snaps {
		unlock, err := a.useSnapshot(ctx, s.ID)
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
func (a *archiver) useSnapshot(ctx context.Context, id string) (func(), error) {
	for range 3 {
		unlock := a.lockSnapshot(id, false)
		snap, err := a.store.GetSnapshot(ctx, id)
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
		unlock = a.lockSnapshot(id, true)
		err = a.restoreLocked(ctx, id)
		unlock()
		if err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("snapshot %s keeps being archived while in use; try again: %w", id, errdefs.ErrConflict)
}

// restoreLocked brings an archived snapshot's volume back into the pool and
// marks it ready. The caller holds the snapshot's exclusive lock.
func (a *archiver) restoreLocked(ctx context.Context, id string) error {
	ctx = context.WithoutCancel(ctx)
	snap, err := a.store.GetSnapshot(ctx, id)
	if err != nil {
		return err
	}
	if snap.State != SnapArchived {
		return nil // restored (or deleted) meanwhile; the caller looks again
	}
	start := time.Now()
	links := 0
	if !a.host.HasSnapshot(ctx, id) {
		n, err := a.restoreChain(ctx, snap)
		if err != nil {
			return fmt.Errorf("restore archived snapshot %s: %w", id, err)
		}
		links = n
	}
	if err := a.store.UpdateSnapshotState(ctx, id, []store.SnapshotState{SnapArchived}, SnapReady); err != nil {
		return err
	}
	a.log.Info("restored archived snapshot", "snapshot", id, "streams", links, "took", time.Since(start))
	return nil
}

// restoreChain replays snap's chain onto the nearest volume below it in the
// pool and returns how many streams it took. The archiver may archive that
// base between the walk and its lock (it archives the oldest turns first,
// so the walk the next time ends lower down): the walk is then done again.
func (a *archiver) restoreChain(ctx context.Context, snap store.Snapshot) (int, error) {
	const attempts = 10
	for range attempts {
		base, paths, err := a.archiveChain(ctx, snap)
		if err != nil {
			return 0, err
		}
		if a.chainWalked != nil {
			a.chainWalked(base)
		}
		// The base is older than snap (see the lock order above).
		unlockBase := a.lockSnapshot(base, false)
		b, err := a.store.GetSnapshot(ctx, base)
		if err == nil && b.State == SnapReady {
			err = a.host.RestoreSnapshot(ctx, snap.ID, base, paths)
			unlockBase()
			return len(paths), err
		}
		unlockBase()
		if err != nil {
			return 0, err
		}
	}
	return 0, fmt.Errorf("the chain's base kept leaving the pool (%d walks); try again: %w", attempts, errdefs.ErrConflict)
}

// maxChain bounds the walk down an archive chain (a cycle would be a bug).
const maxChain = 100_000

// archiveChain finds the streams that rebuild an archived snapshot: from
// the nearest snapshot down its chain whose volume is in the pool (the base)
// up to the snapshot itself, oldest first. The chain is read in one query:
// a turn's is up to an anchor spacing long, and the archiver checks it
// before every volume it drops.
func (a *archiver) archiveChain(ctx context.Context, snap store.Snapshot) (base string, paths []string, err error) {
	var links []store.Snapshot
	if snap.ArchiveParent != "" {
		if links, err = a.store.ArchiveParents(ctx, snap.ArchiveParent, maxChain); err != nil {
			return "", nil, err
		}
	}
	cur := snap
	for i := 0; ; i++ {
		if cur.ArchivePath == "" || cur.ArchiveParent == "" {
			return "", nil, fmt.Errorf("snapshot %s has no stream, so %s cannot be rebuilt: %w", cur.ID, snap.ID, errdefs.ErrNotFound)
		}
		if i == maxChain {
			return "", nil, fmt.Errorf("the archive chain of %s is longer than %d: %w", snap.ID, maxChain, errdefs.ErrInvalid)
		}
		paths = append(paths, cur.ArchivePath)
		if i >= len(links) || links[i].ID != cur.ArchiveParent {
			return "", nil, fmt.Errorf("snapshot %s's stream is a delta against %s, which is not recorded: %w", cur.ID, cur.ArchiveParent, errdefs.ErrNotFound)
		}
		parent := links[i]
		if parent.State == SnapReady {
			slices.Reverse(paths)
			return parent.ID, paths, nil
		}
		if parent.State == SnapCreating {
			return "", nil, fmt.Errorf("snapshot %s is still being taken: %w", parent.ID, errdefs.ErrConflict)
		}
		cur = parent
	}
}

// lockChainChange takes what a change to id's place in an archive chain
// needs: its exclusive lock, then archiveMu.
func (a *archiver) lockChainChange(id string) (unlock func()) {
	unlockSnap := a.lockSnapshot(id, true)
	a.archiveMu.Lock()
	return func() {
		a.archiveMu.Unlock()
		unlockSnap()
	}
}

// dropSnapshot tombstones a ready or archived snapshot and frees its volume
// and stream. A snapshot that archived snapshots are deltas against keeps
// its stream as a link of their chain; an anchor without a stream is
// refused: they could not be restored without it.
func (a *archiver) dropSnapshot(ctx context.Context, id string) error {
	ctx = context.WithoutCancel(ctx)
	defer a.lockChainChange(id)()
	snap, err := a.store.GetSnapshot(ctx, id)
	if err != nil {
		return err
	}
	n, err := a.store.CountArchivedOn(ctx, id)
	if err != nil {
		return err
	}
	if n > 0 && snap.ArchivePath == "" {
		return fmt.Errorf("snapshot %s is the anchor of %d archived snapshot(s), which cannot be restored without it; delete those first: %w", id, n, errdefs.ErrConflict)
	}
	if err := a.store.UpdateSnapshotState(ctx, id, usableStates, SnapDeleted); err != nil {
		return err
	}
	if snap.State == SnapReady {
		a.deleteVolumeLater(id)
	}
	if n > 0 {
		return nil // the stream stays, a link of the chains that need it
	}
	a.removeLink(ctx, snap)
	a.dropUnneededLinks(ctx, snap.ArchiveParent)
	return nil
}

// removeLink removes a deleted snapshot's stream. Ready snapshots whose
// streams are deltas against it have their volumes: their streams go too,
// and the archiver writes new ones. The caller holds archiveMu.
func (a *archiver) removeLink(ctx context.Context, s store.Snapshot) {
	deps, err := a.store.ListSnapshots(ctx, store.SnapshotFilter{ArchiveParent: s.ID, States: []store.SnapshotState{SnapReady}, WithStream: true})
	if err != nil {
		a.log.Warn("list streams made against a deleted snapshot", "snapshot", s.ID, "err", err)
	}
	for _, d := range deps {
		a.forgetStream(ctx, d)
	}
	a.forgetStream(ctx, s)
}

// forgetStream removes a snapshot's stream and its record of it.
func (a *archiver) forgetStream(ctx context.Context, s store.Snapshot) {
	if s.ArchivePath == "" {
		return
	}
	if err := a.store.SetSnapshotArchive(ctx, s.ID, "", ""); err != nil {
		a.log.Warn("forget archive stream", "snapshot", s.ID, "err", err)
		return
	}
	if err := a.host.RemoveArchive(s.ArchivePath); err != nil {
		a.log.Warn("remove archive stream", "snapshot", s.ID, "err", err)
	}
}

// dropUnneededLinks walks down a chain from id and removes the streams of
// deleted links that nothing needs any more. The caller holds archiveMu.
func (a *archiver) dropUnneededLinks(ctx context.Context, id string) {
	for range maxChain {
		if id == "" {
			return
		}
		s, err := a.store.GetSnapshot(ctx, id)
		if err != nil || s.State != SnapDeleted || s.ArchivePath == "" {
			return
		}
		if n, err := a.store.CountArchivedOn(ctx, id); err != nil || n > 0 {
			return
		}
		a.removeLink(ctx, s)
		id = s.ArchiveParent
	}
}

// archiveLater asks the archiver to look at a sandbox's turns.
func (a *archiver) archiveLater(sandboxID string) {
	if !a.archiving() {
		return
	}
	a.queueMu.Lock()
	if a.archivePending[sandboxID] {
		a.queueMu.Unlock()
		return
	}
	a.archivePending[sandboxID] = true
	a.queueMu.Unlock()
	select {
	case a.archiveQ <- sandboxID:
	default:
		// Full: a later turn of the sandbox asks again.
		a.queueMu.Lock()
		delete(a.archivePending, sandboxID)
		a.queueMu.Unlock()
	}
}

// runArchiver archives old turns, one at a time host-wide, until ctx ends.
// It starts with every sandbox that has turns (work a previous daemon left).
func (a *archiver) runArchiver(ctx context.Context) {
	if !a.archiving() {
		return
	}
	turns, err := a.store.ListSnapshots(ctx, store.SnapshotFilter{Kinds: []store.SnapshotKind{KindTurn},
		States: []store.SnapshotState{SnapReady}})
	if err != nil {
		a.log.Warn("list turns to archive", "err", err)
	}
	seen := map[string]bool{}
	for _, t := range turns {
		if !seen[t.SandboxID] {
			seen[t.SandboxID] = true
			a.archiveLater(t.SandboxID)
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case id := <-a.archiveQ:
			a.queueMu.Lock()
			delete(a.archivePending, id)
			a.queueMu.Unlock()
			a.archiveSandbox(ctx, id)
		}
	}
}

// archiveStep is one step of archiving a sandbox's turns: write snap's
// stream against parent (when parent is set), then drop the volumes in drop
// (each once its stream is written; a step whose send failed drops
// nothing).
type archiveStep struct {
	snap, parent store.Snapshot
	drop         []store.Snapshot
}

// planArchive picks the steps that archive one sandbox's turns. turns are
// its ready turn snapshots, each with the usable (ready or archived) turn
// after it if there is one (store.TurnWindow); every turn numbered up to
// oldThrough is old, the rest (the newest ArchiveAfter) stay. Anchors (turn
// ≡ 1 mod every) and turns with forks stay too (their streams are written
// all the same, so the chain goes on through them). Every other old ready
// turn gets a stream against the nearest older turn in the pool; a volume
// is dropped once its stream exists and the next turn's stream no longer
// needs it.
func planArchive(turns []store.Snapshot, oldThrough, every int, forked func(id string) bool) []archiveStep {
	if oldThrough <= 0 || every <= 0 {
		return nil
	}
	turns = slices.Clone(turns)
	slices.SortFunc(turns, func(a, b store.Snapshot) int { return a.Turn - b.Turn })
	old, _ := slices.BinarySearchFunc(turns, oldThrough+1, func(s store.Snapshot, n int) int { return s.Turn - n })
	droppable := func(i int) bool {
		return i < old && !isAnchor(turns[i].Turn, every) && turns[i].State == SnapReady && !forked(turns[i].ID)
	}
	streamed := make([]bool, len(turns)) // a stream exists, or will once its step runs
	inPool := make([]bool, len(turns))   // the volume is there, and no step drops it
	for i, t := range turns {
		streamed[i] = t.ArchivePath != ""
		inPool[i] = t.State == SnapReady
	}
	// nearest is the nearest older turn whose volume stays for i's send.
	nearest := func(i int) int {
		for j := i - 1; j >= 0; j-- {
			if inPool[j] {
				return j
			}
		}
		return -1
	}
	var steps []archiveStep
	for i := range turns[:old] {
		t := turns[i]
		// An old turn always has a newer one in a window read whole; one
		// that does not is left for the next pass.
		if t.State != SnapReady || isAnchor(t.Turn, every) || i+1 == len(turns) {
			continue
		}
		step := archiveStep{snap: t}
		if p := nearest(i); !streamed[i] && p >= 0 {
			step.parent = turns[p]
			streamed[i] = true
			if droppable(p) && streamed[p] {
				step.drop = append(step.drop, turns[p])
				inPool[p] = false
			}
		}
		// This turn's own volume goes now when the next turn will not be
		// sent against it: the next is an anchor or has its stream.
		if next := turns[i+1]; droppable(i) && streamed[i] && (isAnchor(next.Turn, every) || next.ArchivePath != "" || next.State != SnapReady) {
			step.drop = append(step.drop, t)
			inPool[i] = false
		}
		if step.parent.ID != "" || len(step.drop) > 0 {
			steps = append(steps, step)
		}
	}
	return steps
}

func isAnchor(turn, every int) bool { return turn%every == 1%every }

// archiveSandbox runs what planArchive picks for one sandbox.
func (a *archiver) archiveSandbox(ctx context.Context, sandboxID string) {
	w, err := a.store.TurnWindow(ctx, sandboxID, a.cfg.ArchiveAfter)
	if err != nil {
		a.log.Warn("list turns to archive", "sandbox", sandboxID, "err", err)
		return
	}
	forked := func(id string) bool {
		n, err := a.store.CountForksOf(ctx, id)
		return err != nil || n > 0
	}
	steps := planArchive(w.Turns, w.OldThrough, a.cfg.AnchorEvery, forked)
	var drops []store.Snapshot
	for _, step := range steps {
		drops = append(drops, step.drop...)
	}
	dropNow := len(drops) >= a.cfg.DropBatch || a.cfg.Now().Sub(w.Newest) >= dropIdle
	if len(drops) > 0 && !dropNow {
		// Too few to batch: come back when the sandbox has been quiet
		// for a while, unless its next turns make a batch first.
		a.recheckDrops(sandboxID)
	}
	for i, step := range steps {
		if ctx.Err() != nil {
			return
		}
		if step.parent.ID != "" {
			if err := a.sendOne(ctx, step.snap, step.parent); err != nil {
				a.log.Warn("archive turn snapshot", "snapshot", step.snap.ID, "parent", step.parent.ID, "err", err)
				continue
			}
		}
		for _, d := range step.drop {
			if !dropNow {
				break
			}
			if err := a.dropVolume(ctx, d.ID); err != nil {
				a.log.Warn("drop the volume of an archived turn", "snapshot", d.ID, "err", err)
			}
		}
		if step.parent.ID == "" || len(steps)-i-1 > archiveBacklog {
			// Behind a busy sandbox: no pause. A turn every ~50 ms (an
			// agent in a tight loop) outpaces a send plus the pause, and
			// every turn left in the pool makes the next snapshot slower.
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(archiveInterval):
		}
	}
}

// recheckDrops asks the archiver to look at a sandbox again after
// dropIdle; one wait per sandbox, however many passes ask meanwhile.
func (a *archiver) recheckDrops(sandboxID string) {
	a.queueMu.Lock()
	defer a.queueMu.Unlock()
	if a.dropRecheck[sandboxID] {
		return
	}
	a.dropRecheck[sandboxID] = true
	time.AfterFunc(dropIdle, func() {
		a.queueMu.Lock()
		delete(a.dropRecheck, sandboxID)
		a.queueMu.Unlock()
		a.archiveLater(sandboxID)
	})
}

// sendOne writes a turn's stream against parent (both volumes stay usable
// meanwhile) and records it; the turn stays ready.
func (a *archiver) sendOne(ctx context.Context, snap, parent store.Snapshot) error {
	ctx = context.WithoutCancel(ctx)
	id, parentID := snap.ID, parent.ID
	unlockSnap := a.lockSnapshot(id, false)
	unlockParent := a.lockSnapshot(parentID, false)
	cur, err := a.store.GetSnapshot(ctx, id)
	if err == nil && (cur.State != SnapReady || cur.ArchivePath != "") {
		err = fmt.Errorf("snapshot %s is %s (stream %q) now: %w", id, cur.State, cur.ArchivePath, errdefs.ErrConflict)
	}
	if err == nil {
		var p store.Snapshot
		if p, err = a.store.GetSnapshot(ctx, parentID); err == nil && p.State != SnapReady {
			err = fmt.Errorf("parent %s is %s now: %w", parentID, p.State, errdefs.ErrConflict)
		}
	}
	start := time.Now()
	var path string
	if err == nil {
		path, err = a.host.ArchiveSnapshot(ctx, id, parentID)
	}
	sent := time.Since(start)
	unlockParent()
	unlockSnap()
	if err != nil {
		return err
	}

	unlockSnap = a.lockSnapshot(id, true)
	defer unlockSnap()
	unlockParent = a.lockSnapshot(parentID, false)
	defer unlockParent()
	a.archiveMu.Lock()
	defer a.archiveMu.Unlock()
	cur, err = a.store.GetSnapshot(ctx, id)
	if err != nil {
		return err
	}
	p, err := a.store.GetSnapshot(ctx, parentID)
	if err != nil {
		return err
	}
	if cur.State != SnapReady || cur.ArchivePath != "" || !(p.State == SnapReady || p.State == SnapArchived || p.ArchivePath != "") {
		// Deleted meanwhile: a deleted snapshot's stream is garbage, and so
		// is a stream against a parent that can no longer be rebuilt.
		_ = a.host.RemoveArchive(path)
		return fmt.Errorf("snapshot %s (%s) or parent %s (%s) changed while archiving: %w", id, cur.State, parentID, p.State, errdefs.ErrConflict)
	}
	if err := a.store.SetSnapshotArchive(ctx, id, parentID, path); err != nil {
		_ = a.host.RemoveArchive(path)
		return err
	}
	a.log.Debug("archived turn snapshot", "snapshot", id, "turn", cur.Turn, "parent", parentID, "send", sent)
	return nil
}

// dropVolume moves a ready snapshot that has its stream out of the pool
// (archived), under its exclusive lock.
func (a *archiver) dropVolume(ctx context.Context, id string) error {
	ctx = context.WithoutCancel(ctx)
	defer a.lockChainChange(id)()
	snap, err := a.store.GetSnapshot(ctx, id)
	if err != nil {
		return err
	}
	if snap.State != SnapReady || snap.ArchivePath == "" || !a.host.HasArchive(snap.ArchivePath) {
		return nil // changed meanwhile: the next pass looks again
	}
	if _, _, err := a.archiveChain(ctx, snap); err != nil {
		// A link below is gone (its stream lost in a crash, say): this
		// stream could not rebuild the volume, so the volume stays and the
		// archiver sends it again.
		a.forgetStream(ctx, snap)
		return fmt.Errorf("keep the volume of %s: %w", id, err)
	}
	if err := a.store.UpdateSnapshotState(ctx, id, []store.SnapshotState{SnapReady}, SnapArchived); err != nil {
		return err
	}
	if err := a.host.DeleteSnapshot(ctx, id); err != nil {
		// The volume stays: keep the snapshot ready (its stream with it).
		if uerr := a.store.UpdateSnapshotState(ctx, id, []store.SnapshotState{SnapArchived}, SnapReady); uerr != nil {
			a.log.Warn("undo archive", "snapshot", id, "err", uerr)
		}
		return fmt.Errorf("drop the volume of archived snapshot %s: %w", id, err)
	}
	return nil
}

// recoverArchive settles one snapshot record against what is on disk after
// a restart; it reports whether the volume and the stream are to be kept.
func (a *archiver) recoverArchive(ctx context.Context, s store.Snapshot) (keepVolume, keepStream bool) {
	hasVol := a.host.HasSnapshot(ctx, s.ID)
	hasStream := s.ArchivePath != "" && a.host.HasArchive(s.ArchivePath)
	switch {
	case s.State == SnapArchived && hasVol:
		// The daemon died between recording the archive and dropping the
		// volume, or between a restore and its record. The volume is whole
		// either way (it is put in place atomically): use it.
		if err := a.store.UpdateSnapshotState(ctx, s.ID, []store.SnapshotState{SnapArchived}, SnapReady); err != nil {
			a.log.Warn("mark restored snapshot ready", "snapshot", s.ID, "err", err)
		}
		return true, hasStream
	case s.State == SnapArchived && hasStream:
		return false, true
	case s.State == SnapArchived:
		a.log.Warn("archive stream missing; keeping a tombstone", "snapshot", s.ID, "path", s.ArchivePath)
		_ = a.store.UpdateSnapshotState(ctx, s.ID, []store.SnapshotState{SnapArchived}, SnapDeleted)
		return false, false
	case hasVol:
		if s.ArchivePath != "" && !hasStream {
			_ = a.store.SetSnapshotArchive(ctx, s.ID, "", "")
		}
		return true, hasStream
	case hasStream:
		// The volume went but the stream is there: the snapshot lives on,
		// archived.
		a.log.Info("snapshot volume missing but archived; marking it archived", "snapshot", s.ID)
		_ = a.store.UpdateSnapshotState(ctx, s.ID, []store.SnapshotState{SnapReady}, SnapArchived)
		return false, true
	default:
		a.log.Warn("snapshot volume missing; keeping a tombstone", "snapshot", s.ID)
		_ = a.store.UpdateSnapshotState(ctx, s.ID, []store.SnapshotState{SnapReady}, SnapDeleted)
		return false, false
	}
}
