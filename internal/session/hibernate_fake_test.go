package session

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/agentconn"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/runtime"
	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/store"
)

// The fake host saves memory only when its memory field is set (as the
// gvisor runtime does); images are names in a set.

func (h *fakeHost) Hibernate(ctx context.Context, id string) (runtime.CheckpointInfo, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.memory {
		return runtime.CheckpointInfo{}, fmt.Errorf("cannot save memory: %w", errdefs.ErrUnsupported)
	}
	if !h.alive[id] {
		return runtime.CheckpointInfo{}, fmt.Errorf("no sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	delete(h.alive, id)
	h.images["hibernate-"+id] = true
	return runtime.CheckpointInfo{Bytes: 4096, Duration: time.Millisecond}, nil
}

func (h *fakeHost) Wake(ctx context.Context, spec sandbox.Spec, _ *agentconn.Conn) (time.Duration, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.images["hibernate-"+spec.ID] {
		return 0, fmt.Errorf("no image: %w", errdefs.ErrNotFound)
	}
	delete(h.images, "hibernate-"+spec.ID)
	h.alive[spec.ID] = true
	return time.Millisecond, nil
}

func (h *fakeHost) IsHibernated(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.images["hibernate-"+id]
}

func (h *fakeHost) Attach(ctx context.Context, id string) (*sandbox.Sandbox, error) {
	return &sandbox.Sandbox{ID: id}, nil
}

func (h *fakeHost) SnapshotMemory(ctx context.Context, id, snapID, group string, wasPaused bool, _ *agentconn.Conn) (sandbox.SnapshotResult, int64, error) {
	h.mu.Lock()
	memory := h.memory
	h.mu.Unlock()
	if !memory {
		return sandbox.SnapshotResult{}, 0, fmt.Errorf("cannot save memory: %w", errdefs.ErrUnsupported)
	}
	res, err := h.Snapshot(ctx, id, snapID, group, nil)
	if err != nil {
		return res, 0, err
	}
	h.mu.Lock()
	h.images["snapshot-"+snapID] = true
	h.mu.Unlock()
	return res, 8192, nil
}

func (h *fakeHost) CanSaveMemory(string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.memory {
		return fmt.Errorf("cannot save memory: %w", errdefs.ErrUnsupported)
	}
	return nil
}

func (h *fakeHost) MemoryImage(snapID string) (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return "memrt", h.images["snapshot-"+snapID]
}

// A runtime that cannot save memory refuses hibernation and memory
// snapshots as bad requests, and the sandbox carries on.
func TestHibernateRefusedWithoutMemoryRuntime(t *testing.T) {
	m, _, _ := newManager(t, 10)
	ctx := context.Background()
	rec, err := m.Create(ctx, CreateRequest{Team: "t", Template: "base"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Hibernate(ctx, "t", rec.ID); !errdefs.IsInvalid(err) {
		t.Fatalf("hibernate on a runtime without memory: %v, want ErrInvalid", err)
	}
	if _, err := m.Snapshot(ctx, "t", rec.ID, SnapshotRequest{Memory: true}); !errdefs.IsInvalid(err) {
		t.Fatalf("memory snapshot on a runtime without memory: %v, want ErrInvalid", err)
	}
	if got, _ := m.Get(ctx, "t", rec.ID); got.State != StateRunning {
		t.Fatalf("after refusals the sandbox is %s", got.State)
	}
	snaps, _ := m.ListSnapshots(ctx, "t", store.SnapshotFilter{SandboxID: rec.ID})
	if len(snaps) != 0 {
		t.Fatalf("a refused memory snapshot left %d records", len(snaps))
	}
}

// Hibernation: running → hibernated (not counted against the limit, not
// failed by the watch, calls refused unless autoResume) → running again on
// resume; a restart reattaches it; a missing image fails it.
func TestHibernateLifecycle(t *testing.T) {
	m, h, st := newManager(t, 1)
	h.memory = true
	ctx := context.Background()
	rec, err := m.Create(ctx, CreateRequest{Team: "t", Template: "base"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := m.Hibernate(ctx, "t", rec.ID)
	if err != nil || got.State != StateHibernated {
		t.Fatalf("hibernate: %+v, %v", got, err)
	}
	if _, err := m.Hibernate(ctx, "t", rec.ID); !errdefs.IsConflict(err) {
		t.Errorf("hibernating twice: %v, want ErrConflict", err)
	}
	if err := m.Pause(ctx, "t", rec.ID); !errdefs.IsConflict(err) {
		t.Errorf("pausing a hibernated sandbox: %v, want ErrConflict", err)
	}
	m.watch(ctx)
	m.actions.Wait()
	if cur, _ := m.Get(ctx, "t", rec.ID); cur.State != StateHibernated {
		t.Fatalf("the watch changed a hibernated sandbox to %s", cur.State)
	}
	if _, err := m.Agent(ctx, "t", rec.ID); !errdefs.IsConflict(err) {
		t.Errorf("a call to a hibernated sandbox: %v, want ErrConflict", err)
	}
	// It holds no processes: another sandbox fits under a limit of 1.
	other, err := m.Create(ctx, CreateRequest{Team: "t", Template: "base"})
	if err != nil {
		t.Fatalf("create beside a hibernated sandbox under a limit of 1: %v", err)
	}
	if err := m.Delete(ctx, "t", other.ID); err != nil {
		t.Fatal(err)
	}

	// A restart reattaches it as hibernated.
	m2 := New(m.cfg, st, h, m.log)
	if err := m2.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if cur, _ := m2.Get(ctx, "t", rec.ID); cur.State != StateHibernated {
		t.Fatalf("after a restart: %s", cur.State)
	}
	woke, err := m2.Resume(ctx, "t", rec.ID)
	if err != nil || !woke {
		t.Fatalf("resume a hibernated sandbox: %v, %v", woke, err)
	}
	if cur, _ := m2.Get(ctx, "t", rec.ID); cur.State != StateRunning {
		t.Fatalf("after resume: %s", cur.State)
	}

	// Hibernated again, then its image disappears: resume fails it.
	if _, err := m2.Hibernate(ctx, "t", rec.ID); err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	delete(h.images, "hibernate-"+rec.ID)
	h.mu.Unlock()
	if _, err := m2.Resume(ctx, "t", rec.ID); !errdefs.IsNotFound(err) {
		t.Errorf("resume without an image: %v, want ErrNotFound", err)
	}
	if cur, _ := m2.Get(ctx, "t", rec.ID); cur.State != StateFailed {
		t.Errorf("a sandbox whose image is gone is %s, want failed", cur.State)
	}
}

// A snapshot with memory records its image's size; forks of it restore
// the memory unless asked for the files only.
func TestMemorySnapshotFork(t *testing.T) {
	m, h, _ := newManager(t, 10)
	h.memory = true
	ctx := context.Background()
	rec, err := m.Create(ctx, CreateRequest{Team: "t", Template: "base"})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := m.Snapshot(ctx, "t", rec.ID, SnapshotRequest{Name: "warm", Memory: true})
	if err != nil {
		t.Fatal(err)
	}
	if snap.MemoryBytes != 8192 {
		t.Fatalf("memory bytes %d", snap.MemoryBytes)
	}
	if got, _ := m.GetSnapshot(ctx, "t", snap.ID); got.MemoryBytes != 8192 {
		t.Fatalf("stored memory bytes %d", got.MemoryBytes)
	}
	h.mu.Lock()
	h.lastSpec = sandbox.Spec{}
	h.mu.Unlock()
	if _, err := m.Create(ctx, CreateRequest{Team: "t", Template: snap.ID}); err != nil {
		t.Fatal(err)
	}
	if h.lastSpec.MemoryFrom != snap.ID || h.lastSpec.Runtime != "memrt" {
		t.Errorf("a fork of a memory snapshot restores from %q on %q, want %q on the runtime that saved it", h.lastSpec.MemoryFrom, h.lastSpec.Runtime, snap.ID)
	}
	if _, err := m.Create(ctx, CreateRequest{Team: "t", Template: snap.ID, Runtime: "other"}); !errdefs.IsInvalid(err) {
		t.Errorf("a fork of a memory snapshot onto another runtime: %v, want ErrInvalid", err)
	}
	if _, err := m.Create(ctx, CreateRequest{Team: "t", Template: snap.ID, FilesOnly: true}); err != nil {
		t.Fatal(err)
	}
	if h.lastSpec.MemoryFrom != "" {
		t.Errorf("a files-only fork restores memory from %q", h.lastSpec.MemoryFrom)
	}
}

func (h *fakeHost) PowerOff(ctx context.Context, id string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.alive, id)
	delete(h.images, "hibernate-"+id)
	return nil
}

func (h *fakeHost) ColdBoot(ctx context.Context, spec sandbox.Spec, _ *agentconn.Conn) (time.Duration, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.images, "hibernate-"+spec.ID)
	h.alive[spec.ID] = true
	return time.Millisecond, nil
}
