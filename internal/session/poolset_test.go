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

// A pool's runtime is its sandboxes' (not the server's default), a template
// has a pool per runtime, a create claims from the pool of the runtime it
// resolves to, a pool that goes is emptied, and a runtime the template
// does not allow is the pool's failure, not a sandbox.
func TestPoolRuntime(t *testing.T) {
	ctx := context.Background()
	m, h, st := newManager(t, 20)
	m.SetPools(ctx, []PoolConfig{{Template: "base", Min: 2, Runtime: "other"}, {Template: "base", Min: 1}})
	p, plain := m.pool("base@other"), m.pool("base")
	m.fillPool(ctx, p)
	if len(p.ready) != 2 || h.lastSpec.Runtime != "other" {
		t.Fatalf("ready %d, last spec's runtime %q, want 2 of runtime other", len(p.ready), h.lastSpec.Runtime)
	}
	m.fillPool(ctx, plain)
	if len(plain.ready) != 1 || h.lastSpec.Runtime != "fake" {
		t.Fatalf("the template's other pool: ready %d, last spec's runtime %q, want 1 of the default fake", len(plain.ready), h.lastSpec.Runtime)
	}
	if _, err := m.Create(ctx, CreateRequest{Team: "a", Template: "base"}); err != nil || p.hits != 0 || plain.hits != 1 {
		t.Fatalf("a create of the default runtime: %v, hits %d and %d, want the default's pool", err, p.hits, plain.hits)
	}
	if _, err := m.Create(ctx, CreateRequest{Team: "a", Template: "base", Runtime: "other"}); err != nil || p.hits != 1 || len(p.ready) != 1 {
		t.Fatalf("a create on runtime other: %v, hits %d, ready %d, want a claim from its pool", err, p.hits, len(p.ready))
	}
	stats := m.PoolStats()
	if len(stats) != 2 || stats[0].Runtime != "fake" || stats[1].Runtime != "other" {
		t.Fatalf("pool stats name runtimes %+v, want fake then other", stats)
	}
	m.SetPools(ctx, []PoolConfig{{Template: "base", Min: 2}})
	if m.pool("base@other") != nil || len(h.destroyed) != 1 {
		t.Fatalf("after the runtime's pool went: still there %v, destroyed %q", m.pool("base@other") != nil, h.destroyed)
	}
	if err := st.PutTemplate(ctx, store.Template{Name: "strict", Source: "test", Runtime: "fake"}); err != nil {
		t.Fatal(err)
	}
	m.SetPools(ctx, []PoolConfig{{Template: "strict", Min: 1, Runtime: "other"}})
	strict := m.pool("strict@other")
	m.fillPool(ctx, strict)
	if len(strict.ready) != 0 || !strings.Contains(strict.lastErr, "requires runtime fake") {
		t.Fatalf("a pool against its template's runtime: ready %d, last failure %q", len(strict.ready), strict.lastErr)
	}
}
