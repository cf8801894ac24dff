package session

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/network"
	"github.com/warrenhq/warren/internal/store"
)

func (h *fakeHost) NetworkAvailable() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.netFail
}

func (h *fakeHost) UpdateNetwork(ctx context.Context, id string, p network.Policy) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.networks[id]; !ok {
		return fmt.Errorf("network of %s: %w", id, errdefs.ErrNotFound)
	}
	h.networks[id] = p
	return nil
}

func (h *fakeHost) AdoptNetwork(ctx context.Context, id string, p network.Policy) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.networks[id] = p
	return nil
}

func (h *fakeHost) network(id string) (network.Policy, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	p, ok := h.networks[id]
	return p, ok
}

func TestNetworkPolicies(t *testing.T) {
	ctx := context.Background()
	m, h, st := newManager(t, 10)

	plain, err := m.Create(ctx, CreateRequest{Team: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := h.network(plain.ID); ok || plain.Network != nil {
		t.Fatalf("a create that asked for nothing got a network: %+v", plain.Network)
	}
	pol := network.Policy{AllowOut: []string{"198.51.100.0/24", "api.example.com"}, DenyOut: []string{"198.51.100.20"}}
	netted, err := m.Create(ctx, CreateRequest{Team: "a", Network: &pol})
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := h.network(netted.ID); !ok || !slices.Equal(got.AllowOut, pol.AllowOut) {
		t.Fatalf("the host was given %+v, %v", got, ok)
	}
	if rec, _ := st.GetSandbox(ctx, netted.ID); rec.Network == nil || !slices.Equal(rec.Network.DenyOut, pol.DenyOut) {
		t.Fatalf("the record keeps %+v", rec.Network)
	}

	// A malformed policy, or a server that cannot give networks, refuses
	// the create and keeps no record.
	before, _ := st.CountSandboxes(ctx)
	if _, err := m.Create(ctx, CreateRequest{Team: "a", Network: &network.Policy{AllowOut: []string{"not a/cidr"}}}); !errdefs.IsInvalid(err) {
		t.Fatalf("bad policy: %v", err)
	}
	h.netFail = fmt.Errorf("no nftables: %w", errdefs.ErrUnsupported)
	if _, err := m.Create(ctx, CreateRequest{Team: "a", Network: &network.Policy{AllowInternetAccess: true}}); !errdefs.IsUnsupported(err) {
		t.Fatalf("networking unavailable: %v", err)
	}
	h.netFail = nil
	if after, _ := st.CountSandboxes(ctx); after != before {
		t.Fatalf("rejected creates left %d records", after-before)
	}

	// Live updates: only a networked sandbox, only its team.
	if _, err := m.UpdateNetwork(ctx, "a", plain.ID, network.Policy{AllowInternetAccess: true}); !errdefs.IsConflict(err) {
		t.Fatalf("update of a sandbox without a network: %v, want a conflict", err)
	}
	if _, err := m.UpdateNetwork(ctx, "b", netted.ID, network.Policy{}); !errdefs.IsNotFound(err) {
		t.Fatalf("update by another team: %v", err)
	}
	if _, err := m.UpdateNetwork(ctx, "a", netted.ID, network.Policy{DenyOut: []string{"*"}}); !errdefs.IsInvalid(err) {
		t.Fatalf("update with a bad policy: %v", err)
	}
	upd, err := m.UpdateNetwork(ctx, "a", netted.ID, network.Policy{AllowInternetAccess: true})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := h.network(netted.ID); !got.AllowInternetAccess || len(got.AllowOut) != 0 || upd.Network == nil || !upd.Network.AllowInternetAccess {
		t.Fatalf("after update: host %+v, record %+v", got, upd.Network)
	}
	evs, _ := m.Events(ctx, "a", netted.ID, 0, 0)
	if last := evs[len(evs)-1]; last.Kind != "network-updated" || last.Detail != "internet access" {
		t.Fatalf("last event: %+v", last)
	}

	// Forks get the policy; the audit is the team's only.
	_, forks, err := m.Fork(ctx, "a", netted.ID, ForkRequest{Count: 1})
	if err != nil || forks[0].Err != nil {
		t.Fatalf("fork: %v %+v", err, forks)
	}
	if got, ok := h.network(forks[0].Sandbox.ID); !ok || !got.AllowInternetAccess {
		t.Fatalf("the fork's network: %+v %v", got, ok)
	}
	if err := st.AddNetworkEvents(ctx, []store.NetworkEvent{{SandboxID: netted.ID, Verdict: "deny", Reason: "reserved", Protocol: "tcp", Destination: "169.254.169.254", Port: 80}}); err != nil {
		t.Fatal(err)
	}
	if got, err := m.NetworkEvents(ctx, "a", netted.ID, 0, 10); err != nil || len(got) != 1 {
		t.Fatalf("events: %+v %v", got, err)
	}
	if _, err := m.NetworkEvents(ctx, "b", netted.ID, 0, 10); !errdefs.IsNotFound(err) {
		t.Fatalf("another team's events: %v", err)
	}

	// A restart adopts the stored policy.
	h.mu.Lock()
	h.networks = map[string]network.Policy{}
	h.mu.Unlock()
	m2 := New(m.cfg, st, h, m.log)
	if err := m2.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if got, ok := h.network(netted.ID); !ok || !got.AllowInternetAccess {
		t.Fatalf("after recover: %+v %v", got, ok)
	}
	if _, ok := h.network(plain.ID); ok {
		t.Fatalf("recover gave the plain sandbox a network")
	}
}

func TestNetworkPool(t *testing.T) {
	ctx := context.Background()
	m, h, _ := newManager(t, 10)
	m.pools = newPools([]PoolConfig{{Template: "base", Min: 1}, {Template: "base", Min: 1, Network: true}})
	for _, p := range m.pools {
		m.fillPool(ctx, p)
	}
	pooledNet := m.pools[poolKey("base", true, "")].ready[0].sb.ID
	pooledPlain := m.pools[poolKey("base", false, "")].ready[0].sb.ID
	if got, ok := h.network(pooledNet); !ok || got.AllowInternetAccess || len(got.AllowOut) != 0 {
		t.Fatalf("a networked pool's sandbox starts with %+v %v, want nothing open", got, ok)
	}
	pol := network.Policy{AllowOut: []string{"198.51.100.10"}}
	rec, err := m.Create(ctx, CreateRequest{Team: "a", Network: &pol})
	if err != nil {
		t.Fatal(err)
	}
	if rec.ID != pooledNet {
		t.Fatalf("a networked create did not claim the networked pool's sandbox")
	}
	if got, _ := h.network(rec.ID); !slices.Equal(got.AllowOut, pol.AllowOut) {
		t.Fatalf("claimed with %+v", got)
	}
	rec, err = m.Create(ctx, CreateRequest{Team: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if rec.ID != pooledPlain {
		t.Fatalf("a plain create did not claim the plain pool's sandbox")
	}
	if _, ok := h.network(rec.ID); ok {
		t.Fatal("a plain create claimed a sandbox with a network")
	}
}
