package tplbuild

import (
	"context"

	"github.com/warrenhq/warren/internal/store"
)

// CacheEntry is one step cache entry with its snapshot's size.
type CacheEntry struct {
	store.StepCacheEntry
	// InUse: a ready build's template starts from it (never evicted).
	InUse bool
}

// Cache lists a team's step cache, least recently used first, with the
// snapshots' current sizes.
func (s *Service) Cache(ctx context.Context, team string) ([]CacheEntry, error) {
	entries, err := s.cfg.Store.ListStepCache(ctx, team)
	if err != nil {
		return nil, err
	}
	used, err := s.inUse(ctx, team)
	if err != nil {
		return nil, err
	}
	out := make([]CacheEntry, 0, len(entries))
	for _, e := range entries {
		if snap, err := s.cfg.Sandboxes.GetSnapshot(ctx, team, e.SnapshotID); err == nil && snap.ExclusiveBytes > 0 {
			e.Bytes = snap.ExclusiveBytes
		}
		out = append(out, CacheEntry{StepCacheEntry: e, InUse: used[e.SnapshotID]})
	}
	return out, nil
}

// inUse are the snapshots the team's ready builds start from.
func (s *Service) inUse(ctx context.Context, team string) (map[string]bool, error) {
	tmpls, err := s.cfg.Store.ListBuiltTemplates(ctx, team)
	if err != nil {
		return nil, err
	}
	used := map[string]bool{}
	for _, t := range tmpls {
		builds, err := s.cfg.Store.ListTemplateBuilds(ctx, t.ID)
		if err != nil {
			return nil, err
		}
		for _, b := range builds {
			if b.SnapshotID != "" {
				used[b.SnapshotID] = true
			}
		}
	}
	return used, nil
}

// evict drops the memory snapshots of builds no create reaches any more,
// and the least recently used cache entries (and their snapshots) while
// the team's cache holds more than MaxCacheBytes.
func (s *Service) evict(ctx context.Context, team string) {
	if tmpls, err := s.cfg.Store.ListBuiltTemplates(ctx, team); err == nil {
		for _, t := range tmpls {
			s.dropMemory(ctx, team, t, false)
		}
	}
	entries, err := s.Cache(ctx, team)
	if err != nil {
		s.cfg.Log.Warn("list the step cache", "team", team, "err", err)
		return
	}
	var total int64
	for _, e := range entries {
		total += e.Bytes
	}
	for _, e := range entries {
		if total <= s.cfg.MaxCacheBytes {
			return
		}
		if e.InUse {
			continue
		}
		if err := s.cfg.Sandboxes.DeleteSnapshot(ctx, team, e.SnapshotID); err != nil {
			s.cfg.Log.Warn("evict a step cache entry", "snapshot", e.SnapshotID, "err", err)
			continue
		}
		_ = s.cfg.Store.DeleteStepCache(ctx, team, e.Key)
		total -= e.Bytes
	}
}
