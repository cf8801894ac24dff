package session

import (
	"context"
	"strings"
	"testing"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/store"
)

// A template that requires a runtime gives it to every sandbox made from
// it that names none — creates, forks and warm-pool sandboxes — and a
// create naming another runtime is refused, leaving no record.
func TestTemplateRequiresRuntime(t *testing.T) {
	ctx := context.Background()
	m, h, st := newManager(t, 10)
	h.templates["strong"] = true
	if err := st.PutTemplate(ctx, store.Template{Name: "strong", Source: "test", Runtime: "gvisor"}); err != nil {
		t.Fatal(err)
	}

	rec, err := m.Create(ctx, CreateRequest{Team: "a", Template: "strong"})
	if err != nil {
		t.Fatal(err)
	}
	if rec.Runtime != "gvisor" || h.lastSpec.Runtime != "gvisor" {
		t.Errorf("create of a gvisor template: record runtime %q, spec runtime %q; want gvisor", rec.Runtime, h.lastSpec.Runtime)
	}
	if got, _ := m.Get(ctx, "a", rec.ID); got.Runtime != "gvisor" {
		t.Errorf("stored runtime %q, want gvisor", got.Runtime)
	}
	if same, err := m.Create(ctx, CreateRequest{Team: "a", Template: "strong", Runtime: "gvisor"}); err != nil || same.Runtime != "gvisor" {
		t.Errorf("create naming the required runtime: %+v, %v", same, err)
	}

	before, _ := m.List(ctx, "a", store.SandboxFilter{})
	_, err = m.Create(ctx, CreateRequest{Team: "a", Template: "strong", Runtime: "fake"})
	if !errdefs.IsInvalid(err) || !strings.Contains(err.Error(), "template strong requires the gvisor runtime") {
		t.Errorf("create naming another runtime: %v; want ErrInvalid naming the required runtime", err)
	}
	if after, _ := m.List(ctx, "a", store.SandboxFilter{}); len(after) != len(before) {
		t.Errorf("a refused create left a record: %d sandboxes, had %d", len(after), len(before))
	}

	// A fork (live state or a snapshot, even with its parent gone) keeps
	// the template's runtime; naming another is refused the same way.
	_, forks, err := m.Fork(ctx, "a", rec.ID, ForkRequest{Count: 1})
	if err != nil || forks[0].Err != nil || forks[0].Sandbox.Runtime != "gvisor" {
		t.Errorf("fork of a gvisor template's sandbox: %+v, %v", forks, err)
	}
	snap, err := m.Snapshot(ctx, "a", rec.ID, SnapshotRequest{Name: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Delete(ctx, "a", rec.ID); err != nil {
		t.Fatal(err)
	}
	if fork, err := m.Create(ctx, CreateRequest{Team: "a", Template: snap.ID}); err != nil || fork.Runtime != "gvisor" {
		t.Errorf("create from a snapshot of a gvisor template, parent deleted: %+v, %v", fork, err)
	}
	if _, err := m.Create(ctx, CreateRequest{Team: "a", Template: snap.ID, Runtime: "fake"}); !errdefs.IsInvalid(err) {
		t.Errorf("create from the snapshot on another runtime: %v, want ErrInvalid", err)
	}

	// A template without a requirement takes the create's runtime.
	if other, err := m.Create(ctx, CreateRequest{Team: "a", Template: "base", Runtime: "gvisor"}); err != nil || other.Runtime != "gvisor" {
		t.Errorf("create of base naming gvisor: %+v, %v", other, err)
	}
}

// A warm pool of a template that requires a runtime holds sandboxes of
// that runtime, and hands them to creates of the template that name none.
func TestPoolOfTemplateWithRuntime(t *testing.T) {
	ctx := context.Background()
	m, h, st := newManager(t, 10)
	h.templates["strong"] = true
	if err := st.PutTemplate(ctx, store.Template{Name: "strong", Source: "test", Runtime: "gvisor"}); err != nil {
		t.Fatal(err)
	}
	m.pools = newPools([]PoolConfig{{Template: "strong", Min: 1}})
	p := m.pools["strong"]
	m.fillPool(ctx, p)
	if len(p.ready) != 1 || h.lastSpec.Runtime != "gvisor" {
		t.Fatalf("pool of a gvisor template: %d ready, started on %q", len(p.ready), h.lastSpec.Runtime)
	}
	rec, err := m.Create(ctx, CreateRequest{Team: "a", Template: "strong"})
	if err != nil || p.hits != 1 || rec.Runtime != "gvisor" {
		t.Fatalf("claim: %+v, %v, hits %d", rec, err, p.hits)
	}
	if _, err := m.Create(ctx, CreateRequest{Team: "a", Template: "strong", Runtime: "fake"}); !errdefs.IsInvalid(err) {
		t.Errorf("create naming another runtime than the pool's template: %v, want ErrInvalid", err)
	}
}
