package session

import (
	"context"
	"strings"
	"testing"

	"github.com/warrenhq/warren/internal/store"
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

// A pool's runtime is its sandboxes' (not the server's default), a create
// that resolves to another runtime does not claim them, a change of
// runtime replaces the pool, and a runtime the template does not allow is
// the pool's failure, not a sandbox.
func TestPoolRuntime(t *testing.T) {
	ctx := context.Background()
	m, h, st := newManager(t, 20)
	m.SetPools(ctx, []PoolConfig{{Template: "base", Min: 2, Runtime: "other"}})
	p := m.pool("base")
	m.fillPool(ctx, p)
	if len(p.ready) != 2 || h.lastSpec.Runtime != "other" {
		t.Fatalf("ready %d, last spec's runtime %q, want 2 of runtime other", len(p.ready), h.lastSpec.Runtime)
	}
	if _, err := m.Create(ctx, CreateRequest{Team: "a", Template: "base"}); err != nil || p.hits != 0 || p.misses != 1 {
		t.Fatalf("a create of the default runtime: %v, hits %d misses %d, want a miss", err, p.hits, p.misses)
	}
	m.SetPools(ctx, []PoolConfig{{Template: "base", Min: 2}})
	if m.pool("base") == p || len(h.destroyed) != 2 {
		t.Fatalf("after a change of runtime: same pool %v, destroyed %q", m.pool("base") == p, h.destroyed)
	}
	if err := st.PutTemplate(ctx, store.Template{Name: "strict", Source: "test", Runtime: "fake"}); err != nil {
		t.Fatal(err)
	}
	m.SetPools(ctx, []PoolConfig{{Template: "strict", Min: 1, Runtime: "other"}})
	strict := m.pool("strict")
	m.fillPool(ctx, strict)
	if len(strict.ready) != 0 || !strings.Contains(strict.lastErr, "requires runtime fake") {
		t.Fatalf("a pool against its template's runtime: ready %d, last failure %q", len(strict.ready), strict.lastErr)
	}
}
