package session

import (
	"context"
	"testing"
)

// SetPools keeps a pool that stays (its ready sandboxes and counters) with
// its new sizes, stops what a smaller Max or a removed pool leaves over,
// and adds new pools for the loop to fill.
func TestSetPools(t *testing.T) {
	ctx := context.Background()
	m, h, _ := newManager(t, 20)
	m.pools = newPools([]PoolConfig{{Template: "base", Min: 3}, {Template: "other", Min: 1}})
	for _, p := range m.allPools() {
		m.fillPool(ctx, p)
	}
	base := m.pool("base")
	otherReady := len(m.pool("other").ready)
	if _, err := m.Create(ctx, CreateRequest{Team: "a", Template: "base"}); err != nil {
		t.Fatal(err)
	}
	m.SetPools(ctx, []PoolConfig{{Template: "base", Min: 1, Max: 1}, {Template: "third", Min: 2}})
	if m.pool("base") != base || base.cfg.Min != 1 || base.cfg.Max != 1 || len(base.ready) != 1 || base.hits != 1 {
		t.Fatalf("base after SetPools: %+v ready %d hits %d", base.cfg, len(base.ready), base.hits)
	}
	if m.pool("other") != nil || m.pool("third") == nil {
		t.Fatal("other should be gone and third there")
	}
	// One of base's two left over and other's were stopped.
	if len(h.destroyed) != 1+otherReady {
		t.Fatalf("destroyed %q", h.destroyed)
	}
	if n := m.pooled(); n != 1 {
		t.Fatalf("pooled %d", n)
	}
}
