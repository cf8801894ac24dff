package session

import (
	"context"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
)

// A command that arrives while a pause is under way must not be admitted
// into the sandbox that is being frozen: admission and the pause's "no
// command in flight" check are one critical section.
func TestCommandCannotSlipIntoAPause(t *testing.T) {
	ctx := context.Background()
	m, h, _ := newManager(t, 10)
	rec, err := m.Create(ctx, CreateRequest{Team: "a"})
	if err != nil {
		t.Fatal(err)
	}
	admitted := make(chan error, 1)
	h.duringPause = func(id string) {
		h.duringPause = nil
		go func() {
			_, release, err := m.Acquire(ctx, "a", id)
			if err == nil {
				defer release()
			}
			admitted <- err
		}()
		// Give the command every chance to get in before the freeze.
		select {
		case err := <-admitted:
			admitted <- err
		case <-time.After(100 * time.Millisecond):
		}
	}
	perr := m.Pause(ctx, "a", rec.ID)
	aerr := <-admitted
	h.mu.Lock()
	frozen := h.frozen[rec.ID]
	h.mu.Unlock()
	if perr == nil && frozen && aerr == nil {
		t.Fatal("a command was admitted into a sandbox paused under it")
	}
	if perr != nil {
		t.Fatalf("pause: %v", perr)
	}
	if !errdefs.IsConflict(aerr) {
		t.Fatalf("a command arriving during a pause: err %v, want a conflict (the sandbox is paused)", aerr)
	}
}

// acquire admits a call into a team's sandbox or fails the test.
func acquire(t *testing.T, m *Manager, team, id string) func() {
	t.Helper()
	_, release, err := m.Acquire(context.Background(), team, id)
	if err != nil {
		t.Fatal(err)
	}
	return release
}

// A call that arrives while a forced rollback runs waits for it and then
// runs in the rolled-back sandbox; a call in flight refuses an unforced
// rollback, pause and hibernate alike.
func TestCommandWaitsForARollback(t *testing.T) {
	ctx := context.Background()
	m, h, _ := newManager(t, 10)
	rec, err := m.Create(ctx, CreateRequest{Team: "a"})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := m.Turn(ctx, "a", rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	inFlight := acquire(t, m, "a", rec.ID)
	if _, err := m.Rollback(ctx, "a", rec.ID, snap.ID, RollbackOptions{}); !errdefs.IsConflict(err) {
		t.Fatalf("rollback with a call in flight: %v, want a conflict", err)
	}
	if err := m.Pause(ctx, "a", rec.ID); !errdefs.IsConflict(err) {
		t.Fatalf("pause with a call in flight: %v, want a conflict", err)
	}
	admitted := make(chan []string, 1)
	h.duringRollback = func() {
		h.duringRollback = nil
		go func() {
			_, release, err := m.Acquire(ctx, "a", rec.ID)
			if err != nil {
				t.Errorf("a call during a rollback: %v", err)
				admitted <- nil
				return
			}
			release()
			h.mu.Lock()
			admitted <- append([]string(nil), h.rolledBack...)
			h.mu.Unlock()
		}()
		time.Sleep(50 * time.Millisecond) // the call's chance to slip in
	}
	if _, err := m.Rollback(ctx, "a", rec.ID, snap.ID, RollbackOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	inFlight()
	if seen := <-admitted; len(seen) != 1 {
		t.Fatalf("the call was admitted before the rollback ended (rollbacks seen: %v)", seen)
	}
}

// A drain its caller gives up on leaves the sandbox taking calls again.
func TestAbandonedDrainReopens(t *testing.T) {
	ctx := context.Background()
	m, _, _ := newManager(t, 10)
	rec, err := m.Create(ctx, CreateRequest{Team: "a"})
	if err != nil {
		t.Fatal(err)
	}
	inFlight := acquire(t, m, "a", rec.ID)
	dctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, _, err := m.Drain(dctx, "a", rec.ID, time.Minute, 0); err == nil {
		t.Fatal("a drain whose caller left reported success")
	}
	inFlight()
	acquire(t, m, "a", rec.ID)()
}
