package session

import (
	"context"
	"strings"
	"testing"

	"github.com/warrenhq/warren/internal/errdefs"
)

// A filesystem-only pause ends the processes (no memory kept), refuses
// calls even with autoResume, frees its place in the sandbox limit, and a
// resume boots it cold; connect's reboot of a frozen sandbox boots cold too.
func TestPauseFilesOnly(t *testing.T) {
	m, h, _ := newManager(t, 1)
	ctx := context.Background()
	rec, err := m.Create(ctx, CreateRequest{Team: "t", Template: "base", AutoResume: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.PauseFiles(ctx, "t", rec.ID); err != nil {
		t.Fatal(err)
	}
	got, _ := m.Get(ctx, "t", rec.ID)
	if !filesOnly(got) {
		t.Fatalf("after a filesystem-only pause: state %s, reason %q", got.State, got.Reason)
	}
	if h.alive[rec.ID] {
		t.Fatal("a filesystem-only pause left the processes")
	}
	if err := m.PauseFiles(ctx, "t", rec.ID); !errdefs.IsConflict(err) {
		t.Errorf("pausing twice: %v, want ErrConflict", err)
	}
	if _, leave, err := m.Acquire(ctx, "t", rec.ID); !errdefs.IsConflict(err) {
		if leave != nil {
			leave()
		}
		t.Fatalf("a call with autoResume: %v, want ErrConflict (no auto-resume)", err)
	}
	m.watch(ctx)
	m.actions.Wait()
	if cur, _ := m.Get(ctx, "t", rec.ID); !filesOnly(cur) {
		t.Fatalf("the watch changed a filesystem-only pause to %s", cur.State)
	}
	if resumed, err := m.Resume(ctx, "t", rec.ID); err != nil || !resumed {
		t.Fatalf("resume: %v, %v", resumed, err)
	}
	if cur, _ := m.Get(ctx, "t", rec.ID); cur.State != StateRunning || cur.Reason != "" || !h.alive[rec.ID] {
		t.Fatalf("after resume: %s %q alive %v", cur.State, cur.Reason, h.alive[rec.ID])
	}
	if err := m.Pause(ctx, "t", rec.ID); err != nil {
		t.Fatal(err)
	}
	if resumed, err := m.Reboot(ctx, "t", rec.ID); err != nil || !resumed {
		t.Fatalf("reboot of a frozen sandbox: %v, %v", resumed, err)
	}
	if cur, _ := m.Get(ctx, "t", rec.ID); cur.State != StateRunning {
		t.Fatalf("after reboot: %s", cur.State)
	}
	evs, err := m.Events(ctx, "t", rec.ID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if last := evs[len(evs)-1]; last.Kind != "resumed" || !strings.Contains(last.Detail, "booted cold") {
		t.Errorf("last event %+v, want a cold boot", last)
	}
}

func TestAutoPauseFilesOnlyRefusesAutoResume(t *testing.T) {
	m, _, _ := newManager(t, 1)
	_, err := m.Create(context.Background(), CreateRequest{Team: "t", Template: "base", AutoPause: true, AutoPauseFilesOnly: true, AutoResume: true})
	if !errdefs.IsInvalid(err) {
		t.Fatalf("autoPauseMemory false with autoResume: %v, want ErrInvalid", err)
	}
}
