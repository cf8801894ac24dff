package session

import (
	"context"
	"testing"
)

// BenchmarkPoolClaim is the session's and the store's share of a create
// served from a warm pool (the host is a fake). Its context can be
// cancelled, as a request's is: the database driver does more for one.
func BenchmarkPoolClaim(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m, _, _ := newManager(b, 1<<20)
	m.pools = newPools([]PoolConfig{{Template: "base", Min: 1}})
	p := m.pools["base"]
	for b.Loop() {
		b.StopTimer()
		m.fillPool(ctx, p)
		b.StartTimer()
		rec, err := m.Create(ctx, CreateRequest{Team: "a", Template: "base"})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := m.Delete(ctx, "a", rec.ID); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
