package sandbox

import (
	"testing"
	"time"
)

// ranAt runs whenQuiet and returns a channel that receives when fn ran.
func ranAt(l *oldRootDrops) <-chan time.Time {
	ch := make(chan time.Time, 1)
	l.whenQuiet("sb", func() { ch <- time.Now() })
	return ch
}

func TestWhenQuietWaitsForTheLastVolume(t *testing.T) {
	l := &oldRootDrops{quiet: 30 * time.Millisecond}
	defer l.close()
	// Each volume's time is bracketed: made no sooner than before, and no
	// later than after. On a loaded machine a sleep may outlast the quiet,
	// and the work may then rightly run between two volumes: what must
	// hold is that it ran a quiet period after the last volume made
	// before it, whenever that was.
	type made struct{ before, after time.Time }
	var volumes []made
	volume := func() {
		b := time.Now()
		l.volumeMade()
		volumes = append(volumes, made{b, time.Now()})
	}
	volume()
	ran := ranAt(l)
	// Volumes keep coming for a while: each one pushes the work back.
	for range 10 {
		time.Sleep(10 * time.Millisecond)
		volume()
	}
	select {
	case at := <-ran:
		var last made
		for _, v := range volumes {
			if !v.after.After(at) {
				last = v
			}
		}
		if at.Before(last.before.Add(30 * time.Millisecond)) {
			t.Fatalf("ran %v after a volume made before it, before the pool had been quiet for 30ms", at.Sub(last.before))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("never ran")
	}
}

func TestWhenQuietGivesUpWaitingAfterWaitMax(t *testing.T) {
	l := &oldRootDrops{quiet: time.Hour, waitMax: 20 * time.Millisecond}
	defer l.close()
	l.volumeMade()
	select {
	case <-ranAt(l):
	case <-time.After(10 * time.Second):
		t.Fatal("a pool that is never quiet held the work past waitMax")
	}
}

func TestCloseSkipsWaitingWork(t *testing.T) {
	l := &oldRootDrops{quiet: time.Hour}
	l.volumeMade()
	ran := ranAt(l)
	done := make(chan struct{})
	go func() { l.close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("close waited for the quiet")
	}
	select {
	case <-ran:
		t.Fatal("work ran although the host closed first")
	default:
	}
	// After close nothing is taken.
	l.whenQuiet("sb", func() { t.Error("work taken after close") })
}

func TestWhenQuietDropsTheOldestPastTheCap(t *testing.T) {
	l := &oldRootDrops{quiet: time.Hour, maxWaiting: 2}
	defer l.close()
	l.volumeMade()
	first, second := ranAt(l), ranAt(l)
	other := make(chan time.Time, 1)
	l.whenQuiet("another", func() { other <- time.Now() })
	third := ranAt(l) // a third of "sb": the oldest goes now
	select {
	case <-first:
	case <-time.After(10 * time.Second):
		t.Fatal("the oldest of three waiting did not run")
	}
	for name, ch := range map[string]<-chan time.Time{"second": second, "third": third, "another sandbox's": other} {
		select {
		case <-ch:
			t.Errorf("the %s ran before the pool was quiet", name)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
