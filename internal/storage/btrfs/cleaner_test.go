package btrfs

import (
	"context"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/storage"
)

// TestCleanerWakerBatches: the deletes of a burst share one wake, a delete
// after it gets another, and none is made once stopped.
func TestCleanerWakerBatches(t *testing.T) {
	var wakes atomic.Int32
	c := &cleanerWaker{wake: func() { wakes.Add(1) }}
	waitWakes := func(want int32) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for wakes.Load() < want && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		// Long enough for a wrong extra wake to show.
		time.Sleep(3 * cleanerWakeDelay)
		if got := wakes.Load(); got != want {
			t.Fatalf("%d wakes, want %d", got, want)
		}
	}
	for range 8 {
		c.soon("/nowhere")
	}
	waitWakes(1)
	c.soon("/nowhere")
	waitWakes(2)
	c.soon("/nowhere")
	c.stop()
	c.soon("/nowhere")
	time.Sleep(3 * cleanerWakeDelay)
	if got := wakes.Load(); got != 2 {
		t.Fatalf("%d wakes after stop, want 2", got)
	}
}

// TestDeleteWakesCleaner: a deleted volume is dropped within moments,
// without any other call, rather than at the next commit interval (30 s):
// the delete wakes btrfs's cleaner.
func TestDeleteWakesCleaner(t *testing.T) {
	ctx := context.Background()
	s, src, _ := poolWithSource(t)
	gone := storage.Key{Kind: storage.KindSnapshot, Name: "gone"}
	_, err := s.Snapshot(ctx, src, gone, storage.SnapshotOptions{ReadOnly: true})
	must(t, err)
	must(t, s.Delete(ctx, gone))
	root, err := os.Open(s.Root())
	must(t, err)
	defer root.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		pending, err := searchOffsets(int(root.Fd()), rootTreeObjectID, orphanObjectID, orphanItemKey)
		must(t, err)
		if len(pending) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("deleted volume still waiting to be dropped 10 s after the delete: %v", pending)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
