package sandbox

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"

	"github.com/warrenhq/warren/internal/runtime"
	"github.com/warrenhq/warren/internal/storage"
	"github.com/warrenhq/warren/internal/storage/dir"
)

// freezeRuntime counts freezes and thaws.
type freezeRuntime struct {
	mu              sync.Mutex
	frozen          bool
	pauses, resumes int
	pauseErr        error
}

func (r *freezeRuntime) Capabilities() runtime.Capabilities    { return runtime.Capabilities{Pause: true} }
func (r *freezeRuntime) Destroy(context.Context, string) error { return nil }

func (r *freezeRuntime) Pause(context.Context, string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pauseErr != nil {
		return r.pauseErr
	}
	r.pauses++
	r.frozen = true
	return nil
}

func (r *freezeRuntime) Resume(context.Context, string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.resumes++
	r.frozen = false
	return nil
}

func (r *freezeRuntime) counts() (pauses, resumes int, frozen bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pauses, r.resumes, r.frozen
}

// takenStorage fixes a snapshot's content at once (Taken) and writes it
// out only when release is closed, as btrfs does with its commit.
type takenStorage struct {
	storage.Storage
	release chan struct{}
}

func (s *takenStorage) Snapshot(ctx context.Context, parent, key storage.Key, opts storage.SnapshotOptions) (string, error) {
	if opts.Taken != nil {
		opts.Taken()
	}
	<-s.release
	return s.Storage.Snapshot(ctx, parent, key, opts)
}

func newTestSnapshots(t *testing.T, rt snapshotRuntime, wrap func(storage.Storage) storage.Storage) *snapshots {
	t.Helper()
	st, err := dir.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Create(t.Context(), sandboxKey("sb")); err != nil {
		t.Fatal(err)
	}
	var s storage.Storage = st
	if wrap != nil {
		s = wrap(st)
	}
	log := slog.New(slog.DiscardHandler)
	return &snapshots{pool: &volumes{st: s}, runtime: rt, writeBacks: &writeBackTickets{paths: s, log: log}, log: log}
}

// A snapshot answered at Taken has thawed its sandbox and let the next
// freeze in; the snapshot is read only once written, and settled gets the
// outcome.
func TestSnapshotThawsAtTaken(t *testing.T) {
	ctx := t.Context()
	rt := &freezeRuntime{}
	var ts *takenStorage
	s := newTestSnapshots(t, rt, func(st storage.Storage) storage.Storage {
		ts = &takenStorage{Storage: st, release: make(chan struct{})}
		return ts
	})
	settled := make(chan error, 1)
	res, err := s.Snapshot(ctx, "sb", "one", "", func(_ storage.Info, err error) { settled <- err })
	if err != nil {
		t.Fatal(err)
	}
	if pauses, resumes, frozen := rt.counts(); !res.Settling || frozen || pauses != 1 || resumes != 1 {
		t.Fatalf("answered at Taken: settling %v, frozen %v, %d pauses, %d resumes", res.Settling, frozen, pauses, resumes)
	}
	if res.Info.ExclusiveBytes != -1 || s.pool.unsettled.lookup("one", false) == nil {
		t.Fatalf("a snapshot still being written looks written: %+v", res.Info)
	}
	close(ts.release)
	if err := <-settled; err != nil {
		t.Fatalf("settled: %v", err)
	}
	if !s.HasSnapshot(ctx, "one") {
		t.Fatal("the written snapshot is missing")
	}

	// Without settled the call waits for the write: the freeze lock was
	// let go at the first one's thaw, or this would hang.
	res, err = s.Snapshot(ctx, "sb", "two", "", nil)
	if err != nil || res.Settling || s.pool.unsettled.lookup("two", false) != nil {
		t.Fatalf("second snapshot: %+v %v", res, err)
	}
	if pauses, resumes, frozen := rt.counts(); frozen || pauses != 2 || resumes != 2 {
		t.Fatalf("after two snapshots: frozen %v, %d pauses, %d resumes", frozen, pauses, resumes)
	}
}

// A freeze that fails takes no snapshot and lets the next one freeze.
func TestSnapshotFreezeFails(t *testing.T) {
	ctx := t.Context()
	rt := &freezeRuntime{pauseErr: errors.New("no cgroup")}
	s := newTestSnapshots(t, rt, nil)
	if _, err := s.Snapshot(ctx, "sb", "one", "", nil); err == nil {
		t.Fatal("a snapshot whose freeze failed succeeded")
	}
	if s.HasSnapshot(ctx, "one") {
		t.Fatal("a snapshot whose freeze failed was taken")
	}
	rt.mu.Lock()
	rt.pauseErr = nil
	rt.mu.Unlock()
	res, err := s.Snapshot(ctx, "sb", "two", "", nil)
	if err != nil || res.Settling {
		t.Fatalf("snapshot after a failed freeze: %+v %v", res, err)
	}
	if pauses, resumes, frozen := rt.counts(); frozen || pauses != 1 || resumes != 1 {
		t.Fatalf("frozen %v, %d pauses, %d resumes", frozen, pauses, resumes)
	}
}
