package session

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/runtime"
	"github.com/warrenhq/warren/internal/store"
)

// A claim gives the pooled sandbox the create's own limits, quota and env
// vars; a create that asks for nothing of its own changes nothing.
func TestPoolClaimTailorsTheSandbox(t *testing.T) {
	ctx := context.Background()
	m, h, _ := newManager(t, 10)
	m.pools = newPools([]PoolConfig{{Template: "base", Min: 3}})
	p := m.pools["base"]
	m.fillPool(ctx, p)
	if got := len(p.ready); got != 3 {
		t.Fatalf("pool holds %d, want 3", got)
	}

	plain, err := m.Create(ctx, CreateRequest{Team: "a", Template: "base"})
	if err != nil {
		t.Fatal(err)
	}
	if len(h.tailored) != 0 || p.hits != 1 {
		t.Fatalf("a plain claim: tailored %q, hits %d", h.tailored, p.hits)
	}

	own, err := m.Create(ctx, CreateRequest{Team: "a", Template: "base", Env: map[string]string{"K": "v"},
		Limits: runtime.Limits{MemoryBytes: 128 << 20}, DiskBytes: 100 << 20})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"limits " + own.ID + " 128/1000/1024", "quota " + own.ID + " 100", "env " + own.ID + " map[K:v]"}
	if !slices.Equal(h.tailored, want) || p.hits != 2 {
		t.Fatalf("tailored %q, want %q (hits %d)", h.tailored, want, p.hits)
	}
	if own.Env["K"] != "v" || own.QuotaBytes != 100<<20 || own.MemoryBytes != 128<<20 || own.State != StateRunning {
		t.Fatalf("record: %+v", own)
	}

	// A sandbox that cannot be given its env is dropped and the create
	// fails; nothing of it stays running.
	h.failNext = errors.New("agent gone")
	if _, err := m.Create(ctx, CreateRequest{Team: "a", Template: "base", Env: map[string]string{"K": "v"}}); err == nil {
		t.Fatal("a claim whose env could not be set succeeded")
	}
	h.failNext = nil
	if p.hits != 3 || len(h.destroyed) != 1 {
		t.Fatalf("hits %d, destroyed %q", p.hits, h.destroyed)
	}
	// The pool is empty now: the next create starts one.
	cold, err := m.Create(ctx, CreateRequest{Team: "a", Template: "base", Env: map[string]string{"K": "w"}})
	if err != nil || p.misses != 1 || h.lastSpec.Env["K"] != "w" || cold.ID == plain.ID {
		t.Fatalf("cold create: %v, misses %d, spec env %v", err, p.misses, h.lastSpec.Env)
	}
}

// Ready sandboxes are replaced when they outlive the pool's TTL and when
// their template is rebuilt; a claim never hands out one of an old build.
func TestPoolExpiresOldAndStaleSandboxes(t *testing.T) {
	ctx := context.Background()
	m, h, st := newManager(t, 10)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m.cfg.Now = func() time.Time { return now }
	m.pools = newPools([]PoolConfig{{Template: "base", Min: 2, TTL: time.Minute}})
	p := m.pools["base"]
	m.fillPool(ctx, p)
	first := []string{p.ready[0].sb.ID, p.ready[1].sb.ID}

	now = now.Add(30 * time.Second)
	m.expirePool(ctx, p)
	if len(p.ready) != 2 || p.expired != 0 {
		t.Fatalf("within the TTL: ready %d, expired %d", len(p.ready), p.expired)
	}
	now = now.Add(31 * time.Second)
	m.expirePool(ctx, p)
	m.fillPool(ctx, p)
	if len(p.ready) != 2 || p.expired != 2 || !slices.Equal(h.destroyed, first) {
		t.Fatalf("past the TTL: ready %d, expired %d, destroyed %q (want %q)", len(p.ready), p.expired, h.destroyed, first)
	}

	// A rebuild of the template: the claim skips the old sandboxes (set
	// aside for the loop to remove) and starts a new one.
	if err := st.PutTemplate(ctx, store.Template{Name: "base", Source: "rebuilt", CreatedAt: now.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	old := []string{p.ready[0].sb.ID, p.ready[1].sb.ID}
	sb, err := m.Create(ctx, CreateRequest{Team: "a", Template: "base"})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(old, sb.ID) || p.misses != 1 || len(p.stale) != 2 {
		t.Fatalf("claim after a rebuild got %s (old %q), misses %d, stale %d", sb.ID, old, p.misses, len(p.stale))
	}
	m.expirePool(ctx, p)
	m.fillPool(ctx, p)
	if len(p.stale) != 0 || p.expired != 4 || len(p.ready) != 2 || !slices.Contains(h.destroyed, old[0]) || !slices.Contains(h.destroyed, old[1]) {
		t.Fatalf("after the loop: stale %d, expired %d, ready %d, destroyed %q", len(p.stale), p.expired, len(p.ready), h.destroyed)
	}
	if _, err := m.Create(ctx, CreateRequest{Team: "a", Template: "base"}); err != nil || p.hits != 1 {
		t.Fatalf("claim of a fresh one: %v, hits %d", err, p.hits)
	}
}
