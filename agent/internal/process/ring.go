package process

// ring keeps the newest bytes of one output stream, up to max, addressed by
// absolute offsets: byte n of the stream, once written, is always at offset
// n, whether or not it is still kept. The buffer grows as output arrives, so
// a quiet process costs almost nothing.
type ring struct {
	buf        []byte
	max        int
	start, end uint64 // [start, end) is kept
}

func newRing(max int) ring { return ring{max: max} }

// write appends p, dropping the oldest bytes past max.
func (r *ring) write(p []byte) {
	if r.max <= 0 {
		r.end += uint64(len(p))
		r.start = r.end
		return
	}
	if len(p) > r.max {
		r.end += uint64(len(p) - r.max)
		r.start = r.end
		p = p[len(p)-r.max:]
	}
	if need := r.end + uint64(len(p)); need > uint64(len(r.buf)) && len(r.buf) < r.max {
		n := min(max(need, uint64(2*len(r.buf))), uint64(r.max))
		r.buf = append(r.buf, make([]byte, int(n)-len(r.buf))...)
	}
	for len(p) > 0 {
		pos := int(r.end % uint64(len(r.buf)))
		n := copy(r.buf[pos:], p)
		p = p[n:]
		r.end += uint64(n)
	}
	if r.end-r.start > uint64(len(r.buf)) {
		r.start = r.end - uint64(len(r.buf))
	}
}

// read copies up to limit bytes from offset off, or from the oldest byte
// kept when off is older; at is the offset of the first byte returned.
func (r *ring) read(off uint64, limit int) (data []byte, at uint64) {
	at = max(off, r.start)
	if at >= r.end {
		return nil, at
	}
	n := int(min(r.end-at, uint64(limit)))
	data = make([]byte, 0, n)
	for len(data) < n {
		pos := int(at+uint64(len(data))) % len(r.buf)
		chunk := min(n-len(data), len(r.buf)-pos)
		data = append(data, r.buf[pos:pos+chunk]...)
	}
	return data, at
}
