package metrics

// ring keeps the last capacity samples of one sandbox, oldest first. It
// grows as samples come (append's doubling) up to its capacity, so a
// sandbox that lives for minutes holds minutes of samples, not an hour's
// worth of zeroes.
type ring struct {
	buf      []Sample
	capacity int
	start    int // index of the oldest sample once full
	n        int
}

func newRing(capacity int) *ring { return &ring{capacity: capacity} }

func (r *ring) push(s Sample) {
	if r.capacity <= 0 {
		return
	}
	if r.n < r.capacity {
		if len(r.buf) < r.capacity && cap(r.buf) == len(r.buf) {
			// Grow by doubling but never past the capacity.
			grown := make([]Sample, len(r.buf), min(max(2*len(r.buf), 16), r.capacity))
			copy(grown, r.buf)
			r.buf = grown
		}
		r.buf = append(r.buf, s)
		r.n++
		return
	}
	r.buf[r.start] = s
	r.start = (r.start + 1) % len(r.buf)
}

// at returns the i-th oldest sample.
func (r *ring) at(i int) Sample { return r.buf[(r.start+i)%len(r.buf)] }

func (r *ring) last() (Sample, bool) {
	if r.n == 0 {
		return Sample{}, false
	}
	return r.at(r.n - 1), true
}
