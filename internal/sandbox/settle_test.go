package sandbox

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
)

func TestSettlingWaitsForTheSnapshotCall(t *testing.T) {
	var s unsettledSnapshots
	ctx := context.Background()
	st := s.begin("sb", "snap")
	got := make(chan error, 2)
	go func() { got <- s.snapshot(ctx, "snap") }()
	go func() { got <- s.sandbox(ctx, "sb") }()
	select {
	case err := <-got:
		t.Fatalf("a waiter returned (%v) before the snapshot call ended", err)
	case <-time.After(50 * time.Millisecond):
	}
	if err := s.snapshot(ctx, "other"); err != nil {
		t.Fatalf("another snapshot waited: %v", err)
	}
	if err := s.sandbox(ctx, "other"); err != nil {
		t.Fatalf("another sandbox waited: %v", err)
	}
	s.end(st, nil)
	for range 2 {
		if err := <-got; err != nil {
			t.Fatalf("waiter: %v", err)
		}
	}
	s.finished(st)
	s.wg.Wait()
	if err := s.snapshot(ctx, "snap"); err != nil {
		t.Fatalf("after the call: %v", err)
	}
}

func TestSettlingReportsALostSnapshot(t *testing.T) {
	var s unsettledSnapshots
	ctx := context.Background()
	st := s.begin("sb", "snap")
	waiting := s.lookup("snap", false) // a waiter that looked before the end
	go s.end(st, errors.New("commit failed"))
	if err := s.written(ctx, waiting); !errdefs.IsNotFound(err) {
		t.Fatalf("snapshot whose commit failed: %v, want not found", err)
	}
	// The sandbox is free again whatever became of its snapshot.
	if err := s.sandbox(ctx, "sb"); err != nil {
		t.Fatalf("sandbox after a failed snapshot: %v", err)
	}
	s.finished(st)
}

func TestSettlingWaitHonoursContext(t *testing.T) {
	var s unsettledSnapshots
	st := s.begin("sb", "snap")
	defer func() { s.end(st, nil); s.finished(st) }()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := s.snapshot(ctx, "snap"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("snapshot wait: %v, want deadline exceeded", err)
	}
	if err := s.sandbox(ctx, "sb"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("sandbox wait: %v, want deadline exceeded", err)
	}
}

// TestSettlingCloseWaitsThenStopsCounting: close waits for the calls under
// way; a call begun after it is not waited for (nor does it trip the
// wait group).
func TestSettlingCloseWaitsThenStopsCounting(t *testing.T) {
	var s unsettledSnapshots
	st := s.begin("sb", "snap")
	closed := make(chan struct{})
	go func() { s.close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("close returned while a call was under way")
	case <-time.After(30 * time.Millisecond):
	}
	s.end(st, nil)
	s.finished(st)
	<-closed
	late := s.begin("sb", "late")
	s.end(late, nil)
	s.finished(late)
	s.close()
}
