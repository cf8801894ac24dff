package bench

import (
	"errors"
	"sync/atomic"
	"testing"
)

// Rounds of n calls at once make at least the samples asked for, and at
// least one round however many sandboxes there are.
func TestRoundsFor(t *testing.T) {
	for _, c := range []struct{ n, want, rounds int }{
		{1, 20, 20}, {3, 5, 2}, {10, 20, 2}, {50, 20, 1}, {1, 1, 1}, {5, 0, 1},
	} {
		if got := roundsFor(c.n, c.want); got != c.rounds {
			t.Errorf("roundsFor(%d, %d) = %d, want %d", c.n, c.want, got, c.rounds)
		}
	}
}

// inLoops times every call of every client; timedTogether one call of
// each; an error from any call is returned.
func TestInLoops(t *testing.T) {
	var calls atomic.Int64
	got, err := inLoops(4, 3, func(int) error { calls.Add(1); return nil })
	if err != nil || len(got) != 12 || calls.Load() != 12 {
		t.Errorf("inLoops(4, 3): %d samples, %d calls, %v; want 12, 12, nil", len(got), calls.Load(), err)
	}
	got, err = timedTogether(5, func(int) error { return nil })
	if err != nil || len(got) != 5 {
		t.Errorf("timedTogether(5): %d samples, %v; want 5, nil", len(got), err)
	}
	boom := errors.New("boom")
	if _, err := inLoops(3, 2, func(i int) error {
		if i == 1 {
			return boom
		}
		return nil
	}); !errors.Is(err, boom) {
		t.Errorf("inLoops with a failing client: %v, want boom", err)
	}
}
