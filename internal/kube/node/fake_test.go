package node_test

import (
	"context"
	"fmt"
	"maps"
	"sync"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/kube/node"
	"github.com/warrenhq/warren/internal/session"
	"github.com/warrenhq/warren/internal/store"
)

// fakeSessions stands in for the session service: records in a map.
type fakeSessions struct {
	mu      sync.Mutex
	recs    map[string]store.Sandbox
	creates []session.CreateRequest
	deletes []string
	next    int
}

func newFakeSessions() *fakeSessions { return &fakeSessions{recs: map[string]store.Sandbox{}} }

func (f *fakeSessions) List(_ context.Context, _ string, _ store.SandboxFilter) ([]store.Sandbox, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]store.Sandbox, 0, len(f.recs))
	for _, r := range f.recs {
		out = append(out, r)
	}
	return out, nil
}

// Create refuses the template "missing", as the session service does a
// template it does not have.
func (f *fakeSessions) Create(_ context.Context, req session.CreateRequest) (store.Sandbox, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.creates = append(f.creates, req)
	if req.Template == "missing" {
		return store.Sandbox{}, fmt.Errorf("template missing: %w", errdefs.ErrNotFound)
	}
	f.next++
	r := store.Sandbox{ID: fmt.Sprintf("sb%d", f.next), Team: req.Team, Template: req.Template, Runtime: "native",
		State: store.StateRunning, Metadata: maps.Clone(req.Metadata)}
	f.recs[r.ID] = r
	return r, nil
}

func (f *fakeSessions) PruneReplicas(context.Context, string, string, int) error { return nil }

func (f *fakeSessions) ReplicaSnapshots(context.Context) ([]store.Snapshot, error) { return nil, nil }

// Forget is Delete of whatever team holds the sandbox, as a node's copy
// of a sandbox that moved away is destroyed.
func (f *fakeSessions) Forget(ctx context.Context, id string) error {
	f.mu.Lock()
	r, ok := f.recs[id]
	f.mu.Unlock()
	if !ok {
		return fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	return f.Delete(ctx, r.Team, id)
}

func (f *fakeSessions) Delete(_ context.Context, team, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.recs[id]
	if !ok || r.Team != team {
		return fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	delete(f.recs, id)
	f.deletes = append(f.deletes, id)
	return nil
}

func (f *fakeSessions) put(r store.Sandbox) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.recs[r.ID] = r
}

func (f *fakeSessions) remove(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.recs, id)
}

func (f *fakeSessions) counts() (creates, deletes int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.creates), len(f.deletes)
}

func (f *fakeSessions) lastCreate() session.CreateRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.creates[len(f.creates)-1]
}

type fakeReporter struct{}

func (fakeReporter) Report(context.Context) (node.Report, error) {
	return node.Report{
		Capacity: node.Resources{MemoryBytes: 8 << 30, CPUMillis: 4000, DiskBytes: 100 << 30, Sandboxes: 10},
		Runtimes: []string{"native"}, Templates: []string{"bb"}, Devices: []string{"nvidia.com/gpu=0"},
	}, nil
}

// fakePools records the pools set and reports each as ready to its Min.
type fakePools struct {
	mu  sync.Mutex
	set []session.PoolConfig
}

func (f *fakePools) SetPools(_ context.Context, cfgs []session.PoolConfig) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.set = cfgs
}

func (f *fakePools) PoolStats() []session.PoolStats {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []session.PoolStats
	for _, c := range f.set {
		out = append(out, session.PoolStats{Template: c.Template, Network: c.Network, Min: c.Min, Ready: c.Min})
	}
	return out
}

func (f *fakePools) current() []session.PoolConfig {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.set
}
