package session

import (
	"context"
	"strings"
	"testing"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/runtime"
	"github.com/warrenhq/warren/internal/store"
)

func TestOverLimit(t *testing.T) {
	l := store.TeamLimits{Team: "acme", Sandboxes: 2, MemoryBytes: 1 << 30, CPUMillis: 2000, DiskBytes: 4 << 30}
	for _, c := range []struct {
		name string
		u    store.TeamUsage
		d    demand
		want string // "" = admitted; else a word of the message
	}{
		{"room", store.TeamUsage{Sandboxes: 1}, demand{Sandboxes: 1, MemoryBytes: 512 << 20, DiskBytes: 1 << 30}, ""},
		{"sandboxes", store.TeamUsage{Sandboxes: 2}, demand{Sandboxes: 1, DiskBytes: 1}, "limit of 2 sandboxes alive: it holds 2"},
		{"memory", store.TeamUsage{MemoryBytes: 768 << 20}, demand{MemoryBytes: 512 << 20, DiskBytes: 1}, "limit of 1024 MiB memory: it holds 768 MiB and this needs 512 MiB"},
		{"cpu", store.TeamUsage{CPUMillis: 1500}, demand{CPUMillis: 1000, DiskBytes: 1}, "limit of 2 CPUs CPU: it holds 1.5 CPUs"},
		{"disk", store.TeamUsage{DiskBytes: 4 << 30}, demand{DiskBytes: 1 << 20}, "limit of 4096 MiB disk"},
		{"no quota", store.TeamUsage{}, demand{Sandboxes: 1, NoQuota: true}, "need a disk quota"},
		{"shrink over a lowered limit", store.TeamUsage{MemoryBytes: 2 << 30}, demand{MemoryBytes: -(1 << 30)}, ""},
	} {
		err := overLimit(l, c.u, c.d)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v, want admitted", c.name, err)
		case c.want != "" && (!errdefs.IsResourceExhausted(err) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want ErrResourceExhausted with %q", c.name, err, c.want)
		}
	}
	if err := overLimit(store.TeamLimits{Team: "free"}, store.TeamUsage{Sandboxes: 1000}, demand{Sandboxes: 1, NoQuota: true}); err != nil {
		t.Errorf("a team without limits: %v", err)
	}
}

// TestTeamLimitsEnforced: a team at its limit is refused at create, fork,
// a limit change and the resume of a hibernated sandbox, while another
// team creates; freeing room lets it in again.
func TestTeamLimitsEnforced(t *testing.T) {
	ctx := context.Background()
	m, h, _ := newManager(t, 10)
	h.memory = true
	if _, err := m.SetTeamLimits(ctx, store.TeamLimits{Team: "t", Sandboxes: 2, MemoryBytes: 1 << 30}); err != nil {
		t.Fatal(err)
	}
	mk := func(team string, mem int64) (store.Sandbox, error) {
		return m.Create(ctx, CreateRequest{Team: team, Limits: runtime.Limits{MemoryBytes: mem}})
	}
	a, err := mk("t", 256<<20)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mk("t", 1<<30); !errdefs.IsResourceExhausted(err) || !strings.Contains(err.Error(), "memory") {
		t.Fatalf("create past the memory limit: %v", err)
	}
	b, err := mk("t", 256<<20)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mk("t", 256<<20); !errdefs.IsResourceExhausted(err) || !strings.Contains(err.Error(), "sandboxes alive") {
		t.Fatalf("third create: %v, want the sandbox limit", err)
	}
	if _, res, err := m.Fork(ctx, "t", a.ID, ForkRequest{}); err != nil || len(res) != 1 || !errdefs.IsResourceExhausted(res[0].Err) {
		t.Fatalf("fork at the limit: %v %+v", err, res)
	}
	if _, err := mk("other", 256<<20); err != nil {
		t.Fatalf("another team's create: %v", err)
	}
	if _, err := m.UpdateLimits(ctx, "t", b.ID, runtime.Limits{MemoryBytes: 900 << 20}, 0); !errdefs.IsResourceExhausted(err) {
		t.Fatalf("a limit change past the team's memory: %v", err)
	}
	if _, err := m.UpdateLimits(ctx, "t", b.ID, runtime.Limits{MemoryBytes: 128 << 20}, 0); err != nil {
		t.Fatalf("shrinking: %v", err)
	}
	if _, err := m.Hibernate(ctx, "t", a.ID); err != nil {
		t.Fatal(err)
	}
	c, err := mk("t", 256<<20) // a's slot is free while it is hibernated
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Resume(ctx, "t", a.ID); !errdefs.IsResourceExhausted(err) {
		t.Fatalf("resume of a hibernated sandbox past the limit: %v", err)
	}
	if err := m.Delete(ctx, "t", c.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Resume(ctx, "t", a.ID); err != nil {
		t.Fatalf("resume once there is room: %v", err)
	}
	l, u, err := m.TeamUsage(ctx, "t")
	if err != nil || l.Sandboxes != 2 || u.Sandboxes != 2 || u.MemoryBytes != (256+128)<<20 {
		t.Errorf("TeamUsage = %+v %+v %v", l, u, err)
	}
	if _, _, err := m.TeamUsage(ctx, "bad/team"); !errdefs.IsInvalid(err) {
		t.Errorf("TeamUsage of a bad name: %v", err)
	}
}

// TestTeamLimitsAtPoolClaim: a claim from a warm pool is refused past the
// team's limit, and the pooled sandbox goes back to the pool for others.
func TestTeamLimitsAtPoolClaim(t *testing.T) {
	ctx := context.Background()
	m, _, _ := newManager(t, 10)
	m.pools = newPools([]PoolConfig{{Template: "base", Min: 2}})
	p := m.pools["base"]
	m.fillPool(ctx, p)
	if _, err := m.SetTeamLimits(ctx, store.TeamLimits{Team: "t", Sandboxes: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Create(ctx, CreateRequest{Team: "t", Template: "base"}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Create(ctx, CreateRequest{Team: "t", Template: "base"}); !errdefs.IsResourceExhausted(err) {
		t.Fatalf("a claim past the team's limit: %v", err)
	}
	if got := len(p.ready); got != 1 {
		t.Fatalf("after a refused claim the pool holds %d, want the 1 left", got)
	}
	// The refused claim counted as a hit; the sandbox it put back serves
	// the next one.
	if _, err := m.Create(ctx, CreateRequest{Team: "other", Template: "base"}); err != nil || p.hits != 3 || len(p.ready) != 0 {
		t.Fatalf("another team's claim: %v (hits %d, ready %d)", err, p.hits, len(p.ready))
	}
}
