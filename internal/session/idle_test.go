package session

import (
	"context"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/store"
)

// A stream's meter keeps its sandbox from going idle while bytes move,
// touching at most once per interval however often it is noted, and lets
// the sandbox go idle once the stream is silent (though still open).
func TestActivityMeterKeepsBusyStreamsAlive(t *testing.T) {
	ctx := context.Background()
	m, _, _ := newManager(t, 10)
	if m.ActivityMeter("any") != nil {
		t.Fatal("a meter without an idle timeout: nothing is to be noted")
	}
	(*ActivityMeter)(nil).Note() // harmless
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m.cfg.Now = func() time.Time { return now }
	m.cfg.IdleTimeout, m.cfg.IdleAction = 4*time.Second, IdlePause
	sb, err := m.Create(ctx, CreateRequest{Team: "a"})
	if err != nil {
		t.Fatal(err)
	}
	lastActive := func() time.Time {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.live[sb.ID].lastActive
	}
	state := func() store.SandboxState {
		rec, err := m.Get(ctx, "a", sb.ID)
		if err != nil {
			t.Fatal(err)
		}
		return rec.State
	}
	meter := m.ActivityMeter(sb.ID)
	if meter == nil || meter.every != time.Second {
		t.Fatalf("meter %+v: want one touching at most once a second", meter)
	}

	// Noted again and again within one interval: one touch at most.
	opened := lastActive()
	for range 1000 {
		now = now.Add(time.Millisecond / 2)
		meter.Note()
	}
	if got := lastActive(); !got.Equal(opened) {
		t.Fatalf("noted for half a second: last active moved from %v to %v", opened, got)
	}

	// A few bytes every 500 ms for three idle timeouts: never idle.
	for range 24 {
		now = now.Add(500 * time.Millisecond)
		meter.Note()
		m.idle(ctx)
		m.actions.Wait()
		if st := state(); st != StateRunning {
			t.Fatalf("a sandbox with traffic on a port went %s", st)
		}
		if lag := now.Sub(lastActive()); lag > time.Second {
			t.Fatalf("last active lags the traffic by %v", lag)
		}
	}

	// Silent, still open: idle after the timeout.
	now = now.Add(m.cfg.IdleTimeout)
	m.idle(ctx)
	m.actions.Wait()
	if st := state(); st != StatePaused {
		t.Fatalf("a sandbox whose only connection went silent is %s, want paused", st)
	}

	// A short idle timeout gets a shorter interval, so that a busy stream
	// still touches well inside it.
	m.cfg.IdleTimeout = 2 * time.Second
	if got := m.ActivityMeter(sb.ID).every; got != 500*time.Millisecond {
		t.Fatalf("interval for a 2 s idle timeout: %v", got)
	}
}

// BenchmarkActivityMeterNote is the cost a port connection's reads and
// writes pay for counting as activity.
func BenchmarkActivityMeterNote(b *testing.B) {
	m, _, _ := newManager(b, 10)
	m.cfg.IdleTimeout = time.Minute
	sb, err := m.Create(context.Background(), CreateRequest{Team: "a"})
	if err != nil {
		b.Fatal(err)
	}
	meter := m.ActivityMeter(sb.ID)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			meter.Note()
		}
	})
}
