package metrics

// ring keeps the last cap samples of one sandbox, oldest first.
type ring struct {
	buf   []Sample
	start int // index of the oldest sample
	n     int
}

func newRing(capacity int) *ring { return &ring{buf: make([]Sample, capacity)} }

func (r *ring) push(s Sample) {
	if len(r.buf) == 0 {
		return
	}
	if r.n < len(r.buf) {
		r.buf[(r.start+r.n)%len(r.buf)] = s
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
