package session

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/storage"
	"github.com/warrenhq/warren/internal/storage/treemerge"
	"github.com/warrenhq/warren/internal/store"
)

// DefaultDivergenceThreshold is the divergence above which a fork is
// recommended for review rather than merge.
const DefaultDivergenceThreshold = 0.8

// ForkVerdict is what a fork changed since its fork point and what to do
// with it.
type ForkVerdict struct {
	Sandbox   string
	ForkPoint string // the snapshot it was forked from
	State     store.SandboxState
	Added     int // files, symlinks and directories
	Modified  int
	Removed   int
	// BytesChanged adds the sizes of added files, the new sizes of
	// modified ones and the old sizes of removed ones.
	BytesChanged int64
	// Divergence is BytesChanged over the bytes of the fork point's
	// files, capped at 1.
	Divergence     float64
	MergesCleanly  bool
	Conflicts      int
	Recommendation string // discard, review or merge
	Reason         string
}

// ForksSummary judges every fork of sandbox id (forks of its live state
// and of its snapshots) that still has a tree.
func (s *snapshots) ForksSummary(ctx context.Context, team, id string, threshold float64) ([]ForkVerdict, error) {
	mh, ok := s.host.(mergeHost)
	if !ok {
		return nil, fmt.Errorf("this host cannot compare trees: %w", errdefs.ErrUnsupported)
	}
	if threshold <= 0 || threshold > 1 || math.IsNaN(threshold) {
		return nil, fmt.Errorf("threshold %v: want a divergence in (0, 1]: %w", threshold, errdefs.ErrInvalid)
	}
	rec, err := s.Get(ctx, team, id)
	if err != nil {
		return nil, err
	}
	family, err := s.store.ListSandboxes(ctx, store.SandboxFilter{Team: team, Family: rec.Family})
	if err != nil {
		return nil, err
	}
	op := &mergeOp{s}
	out := []ForkVerdict{}
	for _, f := range family {
		if f.ParentSandbox != rec.ID || f.ForkedFrom == "" ||
			!slices.Contains([]store.SandboxState{StateRunning, StatePaused, StateHibernated, StateStopped}, f.State) {
			continue
		}
		v, err := op.judgeFork(ctx, mh, rec, f, threshold)
		if err != nil {
			return nil, fmt.Errorf("fork %s: %w", f.ID, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// judgeFork compares fork f with its fork point and dry-runs its merge
// into rec.
func (s *mergeOp) judgeFork(ctx context.Context, mh mergeHost, rec, f store.Sandbox, threshold float64) (ForkVerdict, error) {
	v := ForkVerdict{Sandbox: f.ID, ForkPoint: f.ForkedFrom, State: f.State}
	base, err := s.usableSnapshot(ctx, rec.Team, f.ForkedFrom)
	if err != nil {
		return v, err
	}
	release, err := s.volumes.useSnapshots(ctx, base)
	if err != nil {
		return v, err
	}
	defer release()
	changes, err := s.host.Diff(ctx, base.ID, f.ID, true)
	if err != nil {
		return v, err
	}
	v.count(changes)
	total, err := mh.SnapshotFileBytes(ctx, base.ID)
	if err != nil {
		return v, err
	}
	v.Divergence = min(1, float64(v.BytesChanged)/float64(max(total, 1)))
	if len(changes) > 0 {
		if err := s.dryMerge(ctx, mh, rec, f, base.ID, changes, &v); err != nil {
			return v, err
		}
	}
	v.recommend(len(changes), threshold)
	return v, nil
}

// dryMerge dry-runs the merge of fork f's changes into rec.
func (s *mergeOp) dryMerge(ctx context.Context, mh mergeHost, rec, f store.Sandbox, base string, theirs []storage.Change, v *ForkVerdict) error {
	req := treemerge.Request{TheirsChanges: theirs, Strategy: treemerge.ThreeWay, DryRun: true}
	var err error
	for _, d := range []struct {
		dst  *string
		id   string
		live bool
	}{{&req.Base, base, false}, {&req.Ours, rec.ID, true}, {&req.Theirs, f.ID, true}} {
		if *d.dst, err = mh.VolumeDir(ctx, d.id, d.live); err != nil {
			return err
		}
	}
	if req.OursChanges, err = s.host.Diff(ctx, base, rec.ID, true); err != nil {
		return err
	}
	entries, err := treemerge.Merge(ctx, req)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Outcome == treemerge.Conflict {
			v.Conflicts++
		}
	}
	v.MergesCleanly = v.Conflicts == 0
	return nil
}

// count adds up a fork's changes. Directories count as paths but weigh
// nothing: their size is bookkeeping.
func (v *ForkVerdict) count(changes []storage.Change) {
	for _, c := range changes {
		if c.Type == "dir" && c.Kind == storage.ChangeModified {
			continue // an entry below it changed; counted there
		}
		var size int64
		switch c.Kind {
		case storage.ChangeAdded:
			v.Added++
			size = c.Size
		case storage.ChangeRemoved:
			v.Removed++
			size = c.OldSize
		default:
			v.Modified++
			size = max(c.Size, c.OldSize)
		}
		if c.Type == "file" {
			v.BytesChanged += size
		}
	}
}

// recommend settles the verdict: discard what changed nothing, review what
// conflicts or diverges past the threshold, merge the rest.
func (v *ForkVerdict) recommend(changes int, threshold float64) {
	switch {
	case changes == 0:
		v.MergesCleanly = true
		v.Recommendation, v.Reason = "discard", "no change since the fork point"
	case !v.MergesCleanly:
		v.Recommendation, v.Reason = "review", fmt.Sprintf("%d conflict(s) with the parent", v.Conflicts)
	case v.Divergence > threshold:
		v.Recommendation, v.Reason = "review", fmt.Sprintf("divergence %.2f is above %.2f", v.Divergence, threshold)
	default:
		v.Recommendation, v.Reason = "merge", "merges cleanly"
	}
}
