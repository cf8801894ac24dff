package session

import (
	"context"
	"maps"
	"slices"
)

// pool returns the pool of a key, or nil.
func (w *warmPools) pool(key string) *pool {
	w.poolsMu.Lock()
	defer w.poolsMu.Unlock()
	return w.pools[key]
}

// allPools returns the pools, in key order.
func (w *warmPools) allPools() []*pool {
	w.poolsMu.Lock()
	defer w.poolsMu.Unlock()
	out := make([]*pool, 0, len(w.pools))
	for _, k := range slices.Sorted(maps.Keys(w.pools)) {
		out = append(out, w.pools[k])
	}
	return out
}

// SetPools replaces the warm pools' configuration while the daemon runs
// (node mode follows the fleet's SandboxPool objects with it). A pool that
// stays keeps its ready sandboxes and counters, and takes the new sizes
// and TTL; the ready sandboxes of a pool that goes, and those a smaller
// Max leaves over, are stopped; the pool loop fills what is new.
func (w *warmPools) SetPools(ctx context.Context, cfgs []PoolConfig) {
	want := newPools(cfgs)
	var surplus []pooled
	w.poolsMu.Lock()
	for key, old := range w.pools {
		p, stays := want[key]
		// Another runtime is another pool: its sandboxes cannot serve.
		stays = stays && p.cfg.Runtime == old.cfg.Runtime
		old.mu.Lock()
		if stays {
			// Only the sizes change: the template and network are the
			// key, which the pool loop reads without the lock, and the
			// runtime is the same.
			old.cfg.Min, old.cfg.Max, old.cfg.TTL = p.cfg.Min, p.cfg.Max, p.cfg.TTL
			want[key] = old
		}
		keep := old.cfg.Max
		if !stays {
			keep = 0
			surplus = append(surplus, old.stale...)
			old.stale = nil
		}
		if len(old.ready) > keep {
			surplus = append(surplus, old.ready[keep:]...)
			old.ready = old.ready[:keep]
		}
		old.mu.Unlock()
	}
	w.pools = want
	w.poolsMu.Unlock()
	for _, e := range surplus {
		if err := w.host.Destroy(context.WithoutCancel(ctx), e.sb.ID, e.sb.Agent); err != nil {
			w.log.Warn("warm pool: stop a sandbox no pool wants", "sandbox", e.sb.ID, "err", err)
		}
	}
	w.wakeRefill()
}
