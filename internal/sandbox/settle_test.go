package sandbox

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
)

func TestSettlingWaitsForTheSnapshotCall(t *testing.T) {
	var s settling
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
	s.finished()
	s.wg.Wait()
	if err := s.snapshot(ctx, "snap"); err != nil {
		t.Fatalf("after the call: %v", err)
	}
}

func TestSettlingReportsALostSnapshot(t *testing.T) {
	var s settling
	ctx := context.Background()
	st := s.begin("sb", "snap")
	go s.end(st, errors.New("commit failed"))
	if err := s.snapshot(ctx, "snap"); !errdefs.IsNotFound(err) {
		t.Fatalf("snapshot whose commit failed: %v, want not found", err)
	}
	// The sandbox is free again whatever became of its snapshot.
	if err := s.sandbox(ctx, "sb"); err != nil {
		t.Fatalf("sandbox after a failed snapshot: %v", err)
	}
	s.finished()
}

func TestSettlingWaitHonoursContext(t *testing.T) {
	var s settling
	st := s.begin("sb", "snap")
	defer func() { s.end(st, nil); s.finished() }()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := s.snapshot(ctx, "snap"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("snapshot wait: %v, want deadline exceeded", err)
	}
	if err := s.sandbox(ctx, "sb"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("sandbox wait: %v, want deadline exceeded", err)
	}
}
