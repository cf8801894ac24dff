package btrfs

import (
	"sync/atomic"
	"testing"
	"time"
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
