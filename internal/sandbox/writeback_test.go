package sandbox

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/storage"
	"github.com/warrenhq/warren/internal/storage/dir"
)

// dirtyRuntime reports a set amount of unwritten data.
type dirtyRuntime struct {
	dirty int64
	err   error
}

func (r *dirtyRuntime) DirtyBytes(ctx context.Context, id string) (int64, error) {
	return r.dirty, r.err
}

// TestWriteBackBeforeSnapshot: a snapshot after a command is served by the
// write-back the command's end began, unless a command started since or
// the sandbox has dirtied pages since; a runtime that cannot tell always
// gets a fresh write-back.
func TestWriteBackBeforeSnapshot(t *testing.T) {
	ctx := context.Background()
	st, err := dir.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Create(ctx, storage.Key{Kind: storage.KindSandbox, Name: "sb"}); err != nil {
		t.Fatal(err)
	}
	rt := &dirtyRuntime{}
	w := &writeBackTickets{paths: st, dirty: rt, log: slog.New(slog.DiscardHandler)}
	syncs := func() uint64 {
		w.syncs.mu.Lock()
		defer w.syncs.mu.Unlock()
		return w.syncs.started
	}
	settle := func() { // the command's write-back is over
		t.Helper()
		w.mu.Lock()
		ticket := w.tickets["sb"]
		w.mu.Unlock()
		for {
			w.syncs.mu.Lock()
			done := w.syncs.finished >= ticket
			w.syncs.mu.Unlock()
			if done {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}

	// No command yet: a fresh write-back.
	before := syncs()
	if err := w.writeBackBeforeSnapshot(ctx, "sb"); err != nil {
		t.Fatal(err)
	}
	if syncs() != before+1 {
		t.Fatalf("%d write-backs without a command, want 1", syncs()-before)
	}

	w.CommandEnded("sb")
	settle()
	before = syncs()
	if err := w.writeBackBeforeSnapshot(ctx, "sb"); err != nil {
		t.Fatal(err)
	}
	if syncs() != before {
		t.Fatalf("%d write-backs after a command's, nothing dirty since; want 0", syncs()-before)
	}

	rt.dirty = 4096
	if err := w.writeBackBeforeSnapshot(ctx, "sb"); err != nil {
		t.Fatal(err)
	}
	if syncs() != before+1 {
		t.Fatalf("%d write-backs with pages dirtied since, want 1", syncs()-before)
	}

	rt.dirty, rt.err = 0, errors.New("no cgroup")
	before = syncs()
	if err := w.writeBackBeforeSnapshot(ctx, "sb"); err != nil {
		t.Fatal(err)
	}
	if syncs() != before+1 {
		t.Fatalf("%d write-backs when the runtime cannot read, want 1", syncs()-before)
	}

	rt.err = nil
	w.CommandEnded("sb")
	settle()
	w.CommandStarted("sb")
	before = syncs()
	if err := w.writeBackBeforeSnapshot(ctx, "sb"); err != nil {
		t.Fatal(err)
	}
	if syncs() != before+1 {
		t.Fatalf("%d write-backs with a command started since, want 1", syncs()-before)
	}

	// A runtime that cannot tell.
	w.dirty = nil
	w.CommandEnded("sb")
	settle()
	before = syncs()
	if err := w.writeBackBeforeSnapshot(ctx, "sb"); err != nil {
		t.Fatal(err)
	}
	if syncs() != before+1 {
		t.Fatalf("%d write-backs on a runtime that cannot tell, want 1", syncs()-before)
	}
}
