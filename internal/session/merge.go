package session

import (
	"context"
	"fmt"
	"slices"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"

	"github.com/warrenhq/warren/internal/storage/treemerge"
	"github.com/warrenhq/warren/internal/store"
)

// EdgeMergedFrom: sandbox → the fork or snapshot whose changes it merged.
const EdgeMergedFrom = store.EdgeMergedFrom

// mergeHost is what merges need of the host beyond snapshotHost: the
// trees' directories (the sandbox host has them; fakes need not).
type mergeHost interface {
	VolumeDir(ctx context.Context, id string, live bool) (string, error)
	SnapshotFileBytes(ctx context.Context, snapID string) (int64, error)
}

// mergeOp holds the helpers of merges and fork summaries (apart, to keep
// the snapshot service's method set small).
type mergeOp struct{ *snapshots }

// MergeRequest asks to merge a fork's (or a snapshot's) changes into a
// sandbox's live tree.
type MergeRequest struct {
	From     string // a sandbox (its live tree) or a snapshot
	Base     string // the common ancestor; default: From's fork point
	Strategy string
	// Paths makes the merge a cherry-pick: these paths are copied from
	// From as they are, without ancestor logic.
	Paths  []string
	DryRun bool
	Force  bool
}

// MergeResult is a merge's answer.
type MergeResult struct {
	From, Base string
	Entries    []treemerge.Entry
	Conflicts  int
	// Before and After are the turn snapshots taken around the merge (a
	// rollback to Before undoes it); empty on a dry run.
	Before, After string
}

// mergeSide is one tree of a merge: a snapshot, or a sandbox's live tree.
type mergeSide struct {
	id   string
	live bool
	snap store.Snapshot // when !live
	rec  store.Sandbox  // the sandbox (of the snapshot), if known
}

// Merge merges req.From's changes since the common ancestor into sandbox
// id's live tree (see MergeRequest), between two turn snapshots.
func (s *snapshots) Merge(ctx context.Context, team, id string, req MergeRequest) (MergeResult, error) {
	mh, ok := s.host.(mergeHost)
	if !ok {
		return MergeResult{}, fmt.Errorf("this host cannot merge trees: %w", errdefs.ErrUnsupported)
	}
	strategy, err := treemerge.ParseStrategy(req.Strategy)
	if err != nil {
		return MergeResult{}, err
	}
	if req.Paths, err = treemerge.CheckPaths(req.Paths); err != nil {
		return MergeResult{}, err
	}
	unlock := s.lockSandbox(id)
	defer unlock()
	rec, err := s.Get(ctx, team, id)
	if err != nil {
		return MergeResult{}, err
	}
	op := &mergeOp{s}
	from, base, err := op.mergeSides(ctx, rec, req)
	if err != nil {
		return MergeResult{}, err
	}
	if err := mergeableTarget(rec, req.DryRun); err != nil {
		return MergeResult{}, err
	}
	if !req.DryRun {
		// Forced, the commands in flight keep running and see the
		// files change under them; new calls wait for the merge.
		reopen, busy, err := s.closeAdmission(rec.ID, "merging", req.Force)
		if err != nil {
			return MergeResult{}, err
		}
		if busy > 0 {
			return MergeResult{}, fmt.Errorf("sandbox %s has %d command(s) running; wait for them, or merge with force (warren merge --force), and they see their files change: %w", rec.ID, busy, errdefs.ErrConflict)
		}
		defer reopen()
	}
	ctx = context.WithoutCancel(ctx)
	res := MergeResult{From: from.id, Base: base.id}
	if !req.DryRun {
		before, err := s.turnLocked(ctx, rec)
		if err != nil {
			return MergeResult{}, fmt.Errorf("take the turn snapshot before the merge: %w", err)
		}
		res.Before = before.ID
	}
	if res.Entries, err = op.mergeTrees(ctx, mh, rec, from, base, strategy, req); err != nil {
		if res.Before != "" {
			return res, fmt.Errorf("the merge stopped part way (roll back to %s, the turn before it, to undo what it wrote): %w", res.Before, err)
		}
		return res, err
	}
	for _, e := range res.Entries {
		if e.Outcome == treemerge.Conflict {
			res.Conflicts++
		}
	}
	if req.DryRun {
		return res, nil
	}
	return op.afterMerge(ctx, rec, res)
}

// afterMerge takes the turn snapshot after a merge and records it.
func (s *mergeOp) afterMerge(ctx context.Context, rec store.Sandbox, res MergeResult) (MergeResult, error) {
	rec, err := s.store.GetSandbox(ctx, rec.ID)
	if err != nil {
		return res, err
	}
	after, err := s.turnLocked(ctx, rec)
	if err != nil {
		return res, fmt.Errorf("take the turn snapshot after the merge: %w", err)
	}
	res.After = after.ID
	s.edge(ctx, rec.Family, EdgeMergedFrom, rec.ID, res.From)
	s.event(ctx, rec, "merged", rec.State, rec.State, CauseAPI,
		fmt.Sprintf("from %s: %d path(s), %d conflict(s)", res.From, len(res.Entries), res.Conflicts))
	return res, nil
}

// mergeableTarget refuses a merge into a sandbox that is not running, or
// (unless a dry run) whose runtime would not see a host-side write.
func mergeableTarget(rec store.Sandbox, dryRun bool) error {
	if rec.State != StateRunning {
		return fmt.Errorf("sandbox %s is %s; only a running sandbox can be merged into: %w", rec.ID, rec.State, errdefs.ErrConflict)
	}
	if rec.Runtime == "gvisor" && !dryRun {
		// The sentry caches the root's dentries and file contents: files
		// written under it on the host would not be seen consistently.
		return fmt.Errorf("sandbox %s runs on gvisor, whose sentry caches its root, so a merge cannot write into its live tree; merge into a native sandbox and fork it, or ask for a dry run: %w", rec.ID, errdefs.ErrConflict)
	}
	return nil
}

// mergeTrees compares and merges the trees (a cherry-pick when
// req.Paths is set).
func (s *mergeOp) mergeTrees(ctx context.Context, mh mergeHost, rec store.Sandbox, from, base mergeSide, strategy treemerge.Strategy, req MergeRequest) ([]treemerge.Entry, error) {
	var held []store.Snapshot
	for _, side := range []mergeSide{from, base} {
		if side.id != "" && !side.live {
			held = append(held, side.snap)
		}
	}
	release, err := s.volumes.useSnapshots(ctx, held...)
	if err != nil {
		return nil, err
	}
	defer release()
	ours, err := mh.VolumeDir(ctx, rec.ID, true)
	if err != nil {
		return nil, err
	}
	theirs, err := mh.VolumeDir(ctx, from.id, from.live)
	if err != nil {
		return nil, err
	}
	if base.id == "" {
		return treemerge.CherryPick(ctx, ours, theirs, req.Paths, req.DryRun)
	}
	mr := treemerge.Request{Ours: ours, Theirs: theirs, Strategy: strategy, DryRun: req.DryRun}
	if mr.Base, err = mh.VolumeDir(ctx, base.id, false); err != nil {
		return nil, err
	}
	if mr.OursChanges, err = s.host.Diff(ctx, base.id, rec.ID, true); err != nil {
		return nil, err
	}
	if mr.TheirsChanges, err = s.host.Diff(ctx, base.id, from.id, from.live); err != nil {
		return nil, err
	}
	return treemerge.Merge(ctx, mr)
}

// mergeSides resolves a merge's source and its base: the request's, or
// the source's fork point when it is of the target's family. A
// cherry-pick has no base.
func (s *mergeOp) mergeSides(ctx context.Context, rec store.Sandbox, req MergeRequest) (from, base mergeSide, err error) {
	if req.From == "" {
		return from, base, fmt.Errorf("from is missing: name the fork (sandbox) or snapshot to merge from: %w", errdefs.ErrInvalid)
	}
	if err := ids.Validate("from", req.From); err != nil {
		return from, base, err
	}
	if from, err = s.sideOf(ctx, rec.Team, req.From); err != nil {
		return from, base, err
	}
	if from.live && from.id == rec.ID {
		return from, base, fmt.Errorf("a sandbox cannot merge its own live tree: %w", errdefs.ErrInvalid)
	}
	if len(req.Paths) > 0 && req.Base == "" {
		return from, mergeSide{}, nil
	}
	baseID := req.Base
	if baseID == "" {
		baseID = from.rec.ForkedFrom
		if from.rec.Family != rec.Family || baseID == "" {
			return from, base, fmt.Errorf("%s is not a fork of sandbox %s's family, so they have no common ancestor; name one (base), or cherry-pick paths: %w", req.From, rec.ID, errdefs.ErrInvalid)
		}
	}
	snap, err := s.usableSnapshot(ctx, rec.Team, baseID)
	if err != nil {
		return from, base, fmt.Errorf("base %s: %w", baseID, err)
	}
	return from, mergeSide{id: snap.ID, snap: snap}, nil
}

// sideOf finds a merge's source: a team's sandbox, else its snapshot.
func (s *mergeOp) sideOf(ctx context.Context, team, id string) (mergeSide, error) {
	rec, err := s.Get(ctx, team, id)
	if err == nil {
		if !slices.Contains([]store.SandboxState{StateRunning, StatePaused, StateHibernated, StateStopped}, rec.State) {
			return mergeSide{}, fmt.Errorf("sandbox %s is %s and has no tree to merge: %w", id, rec.State, errdefs.ErrConflict)
		}
		return mergeSide{id: id, live: true, rec: rec}, nil
	}
	if !errdefs.IsNotFound(err) {
		return mergeSide{}, err
	}
	snap, err := s.usableSnapshot(ctx, team, id)
	if err != nil {
		return mergeSide{}, fmt.Errorf("from %s is neither a sandbox nor a snapshot: %w", id, err)
	}
	side := mergeSide{id: snap.ID, snap: snap}
	if side.rec, err = s.store.GetSandbox(ctx, snap.SandboxID); err != nil {
		side.rec = store.Sandbox{Family: snap.Family}
	}
	return side, nil
}
