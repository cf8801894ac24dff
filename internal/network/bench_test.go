package network

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkSetup measures what a sandbox's network costs to make: a network
// namespace (unshare + bind mount), a veth pair into it with addresses and
// routes, waiting for the links to be up, and the nftables transaction with
// its sets, chain and map entry. Teardown is measured separately.
func BenchmarkSetup(b *testing.B) {
	f := newFakeInternet(b)
	m := f.manager(b)
	ctx := context.Background()
	pol := Policy{AllowOut: []string{"198.51.100.0/24", "allowed.example"}, DenyOut: []string{"198.51.100.20"}}
	i := 0
	for b.Loop() {
		id := fmt.Sprintf("bench%d", i)
		i++
		if _, err := m.Setup(ctx, id, pol); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := m.Teardown(ctx, id); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

func BenchmarkTeardown(b *testing.B) {
	f := newFakeInternet(b)
	m := f.manager(b)
	ctx := context.Background()
	i := 0
	for b.Loop() {
		id := fmt.Sprintf("bench%d", i)
		i++
		b.StopTimer()
		if _, err := m.Setup(ctx, id, Policy{AllowInternetAccess: true}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := m.Teardown(ctx, id); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUpdate measures a live policy change (transaction and cut).
func BenchmarkUpdate(b *testing.B) {
	f := newFakeInternet(b)
	m := f.manager(b)
	ctx := context.Background()
	if _, err := m.Setup(ctx, "upd", Policy{}); err != nil {
		b.Fatal(err)
	}
	pols := []Policy{{AllowOut: []string{"198.51.100.10"}}, {AllowInternetAccess: true, DenyOut: []string{"198.51.100.20"}}}
	i := 0
	for b.Loop() {
		if err := m.Update(ctx, "upd", pols[i%2]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkClaim measures the first policy of a sandbox prepared with no
// access, the way a warm pool hands one out: the transaction only, as there
// is nothing to cut.
func BenchmarkClaim(b *testing.B) {
	f := newFakeInternet(b)
	m := f.manager(b)
	ctx := context.Background()
	pol := Policy{AllowInternetAccess: true, AllowOut: []string{"allowed.example"}, DenyOut: []string{"198.51.100.20"}}
	i := 0
	for b.Loop() {
		id := fmt.Sprintf("claim%d", i)
		i++
		b.StopTimer()
		if _, err := m.Setup(ctx, id, Policy{}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := m.Update(ctx, id, pol); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := m.Teardown(ctx, id); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
