package metrics

import "testing"

func TestRingKeepsTheNewestAndGrowsOnlyAsNeeded(t *testing.T) {
	for _, capacity := range []int{1, 5, 16, 100} {
		r := newRing(capacity)
		if _, ok := r.last(); ok {
			t.Fatalf("cap %d: an empty ring has a last sample", capacity)
		}
		for i := 1; i <= 3*capacity+2; i++ {
			r.push(Sample{Pids: int64(i)})
			want := min(i, capacity)
			if r.n != want {
				t.Fatalf("cap %d after %d pushes: %d samples, want %d", capacity, i, r.n, want)
			}
			for j := 0; j < r.n; j++ {
				if got := r.at(j).Pids; got != int64(i-r.n+1+j) {
					t.Fatalf("cap %d after %d pushes: sample %d is %d, want %d", capacity, i, j, got, i-r.n+1+j)
				}
			}
			if last, _ := r.last(); last.Pids != int64(i) {
				t.Fatalf("cap %d: last %d, want %d", capacity, last.Pids, i)
			}
			if cap(r.buf) > capacity || cap(r.buf) > max(2*i, 16) {
				t.Fatalf("cap %d after %d pushes: buffer of %d", capacity, i, cap(r.buf))
			}
		}
	}
	r := newRing(0)
	r.push(Sample{Pids: 1})
	if r.n != 0 {
		t.Fatal("a ring of capacity 0 kept a sample")
	}
}
