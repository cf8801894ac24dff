package sandbox

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/runtime"
	"github.com/warrenhq/warren/internal/storage"
	"github.com/warrenhq/warren/internal/storage/dir"
)

// dirtyRuntime reports a set amount of unwritten data; nothing else of it
// is used.
type dirtyRuntime struct {
	runtime.Runtime
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
	h := &Host{Storage: st, Runtime: rt, Log: slog.New(slog.DiscardHandler)}
	syncs := func() uint64 {
		h.syncs.mu.Lock()
		defer h.syncs.mu.Unlock()
		return h.syncs.started
	}
	settle := func() { // the command's write-back is over
		t.Helper()
		h.writeBacks.mu.Lock()
		ticket := h.writeBacks.tickets["sb"]
		h.writeBacks.mu.Unlock()
		for {
			h.syncs.mu.Lock()
			done := h.syncs.finished >= ticket
			h.syncs.mu.Unlock()
			if done {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}

	// No command yet: a fresh write-back.
	before := syncs()
	if err := h.writeBackBeforeSnapshot(ctx, "sb"); err != nil {
		t.Fatal(err)
	}
	if syncs() != before+1 {
		t.Fatalf("%d write-backs without a command, want 1", syncs()-before)
	}

	h.CommandEnded("sb")
	settle()
	before = syncs()
	if err := h.writeBackBeforeSnapshot(ctx, "sb"); err != nil {
		t.Fatal(err)
	}
	if syncs() != before {
		t.Fatalf("%d write-backs after a command's, nothing dirty since; want 0", syncs()-before)
	}

	rt.dirty = 4096
	if err := h.writeBackBeforeSnapshot(ctx, "sb"); err != nil {
		t.Fatal(err)
	}
	if syncs() != before+1 {
		t.Fatalf("%d write-backs with pages dirtied since, want 1", syncs()-before)
	}

	rt.dirty, rt.err = 0, errors.New("no cgroup")
	before = syncs()
	if err := h.writeBackBeforeSnapshot(ctx, "sb"); err != nil {
		t.Fatal(err)
	}
	if syncs() != before+1 {
		t.Fatalf("%d write-backs when the runtime cannot read, want 1", syncs()-before)
	}

	rt.err = nil
	h.CommandEnded("sb")
	settle()
	h.CommandStarted("sb")
	before = syncs()
	if err := h.writeBackBeforeSnapshot(ctx, "sb"); err != nil {
		t.Fatal(err)
	}
	if syncs() != before+1 {
		t.Fatalf("%d write-backs with a command started since, want 1", syncs()-before)
	}

	// A runtime that cannot tell.
	h.Runtime = struct{ runtime.Runtime }{}
	h.CommandEnded("sb")
	settle()
	before = syncs()
	if err := h.writeBackBeforeSnapshot(ctx, "sb"); err != nil {
		t.Fatal(err)
	}
	if syncs() != before+1 {
		t.Fatalf("%d write-backs on a runtime that cannot tell, want 1", syncs()-before)
	}
}
