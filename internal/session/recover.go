package session

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/warrenhq/warren/internal/runtime"
	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/store"
)

// recovery reattaches to the sandboxes an earlier daemon left and
// reconciles their records, volumes and archives.
type recovery struct {
	*registry
	host    recoveryHost
	store   recoveryStore
	volumes *archiver
	net     *networks
}

// recoverParallelism bounds how many sandboxes are reattached at once.
const recoverParallelism = 32

// Recover is run once at start: it reattaches to every sandbox the records
// say is alive, fails those that died while the daemon was away, and removes
// whatever no record names.
func (rc *recovery) Recover(ctx context.Context) error {
	recs, err := rc.store.ListSandboxes(ctx, store.SandboxFilter{States: append(liveStates, StateHibernated, StateDestroyed)})
	if err != nil {
		return fmt.Errorf("list sandboxes: %w", err)
	}
	keep := map[string]bool{}
	// A stopped sandbox has no processes but keeps its filesystem.
	stopped, err := rc.store.ListSandboxes(ctx, store.SandboxFilter{States: []store.SandboxState{StateStopped}})
	if err != nil {
		return fmt.Errorf("list stopped sandboxes: %w", err)
	}
	for _, rec := range stopped {
		keep[rec.ID] = true
	}
	var live []store.Sandbox
	for _, rec := range recs {
		switch rec.State {
		case StateCreating:
			rc.fail(ctx, rec.ID, "the daemon stopped while the sandbox was being created")
		case StateDestroyed:
			// A delete that did not finish: reconcile removes the rest.
			if err := rc.store.DeleteSandbox(ctx, rec.ID); err != nil {
				rc.log.Warn("drop destroyed record", "sandbox", rec.ID, "err", err)
			}
		default:
			live = append(live, rec)
		}
	}
	// Reattach in parallel: each waits for its agent to re-dial, and the
	// API is not served until every one is settled.
	var wg sync.WaitGroup
	var keepMu sync.Mutex
	sem := make(chan struct{}, recoverParallelism)
	for _, rec := range live {
		wg.Add(1)
		sem <- struct{}{}
		go func(rec store.Sandbox) {
			defer func() { <-sem; wg.Done() }()
			var sb *sandbox.Sandbox
			var err error
			if rec.State == StateHibernated {
				sb, err = rc.recoverHibernated(ctx, rec)
			} else {
				sb, err = rc.host.Recover(ctx, rec.ID)
			}
			if err == nil && rec.State != StateHibernated {
				err = rc.matchRecord(ctx, rec, sb)
			}
			if err != nil {
				rc.log.Warn("sandbox did not survive the restart", "sandbox", rec.ID, "err", err)
				rc.fail(ctx, rec.ID, "lost while the daemon was down: "+err.Error())
				return
			}
			rc.net.adoptNetwork(ctx, rec)
			keepMu.Lock()
			keep[rec.ID] = true
			keepMu.Unlock()
			rc.mu.Lock()
			ls := &liveSandbox{Sandbox: sb, team: rec.Team, lastActive: rc.cfg.Now(),
				paused:     rec.State == StatePaused || rec.State == StateHibernated,
				hibernated: rec.State == StateHibernated}
			if ls.paused {
				ls.pausedAt = rec.UpdatedAt
			}
			rc.live[rec.ID] = ls
			rc.mu.Unlock()
			rc.log.Info("reattached sandbox", "sandbox", rec.ID, "state", rec.State)
			rc.event(ctx, rec, "reattached", rec.State, rec.State, CauseRestart, "the daemon restarted")
		}(rec)
	}
	wg.Wait()
	rerr := rc.host.Reconcile(ctx, keep)
	if err := rc.store.DeleteOrphanNetworkEvents(ctx); err != nil {
		rc.log.Warn("drop the network audit of deleted sandboxes", "err", err)
	}
	return errors.Join(rerr, rc.recoverSnapshots(ctx))
}

// matchRecord makes a reattached sandbox's processes agree with its
// record where a daemon died between the two: frozen for the instant of a
// snapshot (the record says running) they are thawed; running although the
// record says paused (a pause cut short) they are frozen again.
func (rc *recovery) matchRecord(ctx context.Context, rec store.Sandbox, sb *sandbox.Sandbox) error {
	switch {
	case rec.State == StateRunning && sb.Status.State == runtime.StatePaused:
		rc.log.Info("thawing a sandbox the last daemon left frozen", "sandbox", rec.ID)
		if err := rc.host.Resume(ctx, rec.ID, sb.Agent); err != nil {
			return fmt.Errorf("thaw it: %w", err)
		}
		sb.Status.State = runtime.StateRunning
	case rec.State == StatePaused && sb.Status.State == runtime.StateRunning:
		if err := rc.host.Pause(ctx, rec.ID); err != nil {
			return fmt.Errorf("pause it as its record says: %w", err)
		}
		sb.Status.State = runtime.StatePaused
	}
	return nil
}

// recoverHibernated reattaches to a hibernated sandbox: it has no
// processes to find, only its image, and its agent dials in once woken.
func (rc *recovery) recoverHibernated(ctx context.Context, rec store.Sandbox) (*sandbox.Sandbox, error) {
	if !filesOnly(rec) && !rc.host.IsHibernated(rec.ID) {
		return nil, fmt.Errorf("its hibernation image is missing")
	}
	return rc.host.Attach(ctx, rec.ID)
}

// recoverSnapshots makes snapshot records, volumes and archive streams
// agree: a snapshot being taken when the daemon died is dropped
// (tombstoned), a record whose volume and stream are gone becomes a
// tombstone (see recoverArchive for the archive cases), and a volume or
// stream no live record names is deleted.
func (rc *recovery) recoverSnapshots(ctx context.Context) error {
	snaps, err := rc.store.ListSnapshots(ctx, store.SnapshotFilter{States: []store.SnapshotState{SnapCreating, SnapReady, SnapArchived}})
	if err != nil {
		return fmt.Errorf("list snapshots: %w", err)
	}
	keep, keepStreams := map[string]bool{}, map[string]bool{}
	for _, s := range snaps {
		if s.State == SnapCreating {
			rc.log.Info("dropping a snapshot the daemon died taking", "snapshot", s.ID)
			_ = rc.store.UpdateSnapshotState(ctx, s.ID, []store.SnapshotState{SnapCreating}, SnapDeleted)
			continue
		}
		vol, stream := rc.volumes.recoverArchive(ctx, s)
		keep[s.ID] = vol
		if vol && s.ReferencedBytes < 0 {
			// Answered before it was written, and the daemon died before
			// it recorded the sizes (see sandbox.Host.Snapshot).
			if info, err := rc.host.SnapshotInfo(ctx, s.ID); err == nil && info.ReferencedBytes >= 0 {
				_ = rc.store.SetSnapshotSizes(ctx, s.ID, info.ExclusiveBytes, info.ReferencedBytes)
			}
		}
		if stream {
			keepStreams[s.ArchivePath] = true
		}
	}
	// Deleted snapshots kept as links of archive chains: their streams stay
	// while something needs them.
	links, err := rc.store.ListSnapshots(ctx, store.SnapshotFilter{States: []store.SnapshotState{SnapDeleted}, WithStream: true})
	if err != nil {
		return fmt.Errorf("list archive chain links: %w", err)
	}
	for _, l := range links {
		n, err := rc.store.CountArchivedOn(ctx, l.ID)
		if err == nil && n > 0 && rc.host.HasArchive(l.ArchivePath) {
			keepStreams[l.ArchivePath] = true
			continue
		}
		rc.log.Info("dropping an archive chain link nothing needs or whose stream is gone", "snapshot", l.ID)
		if err := rc.store.SetSnapshotArchive(ctx, l.ID, "", ""); err != nil {
			rc.log.Warn("forget archive stream", "snapshot", l.ID, "err", err)
		}
	}
	return errors.Join(rc.host.ReconcileSnapshots(ctx, keep), rc.host.ReconcileArchives(keepStreams))
}
