package linemerge

import "bytes"

// splitLines cuts b after every '\n'; a last line without one is kept as
// it is, so joining the lines gives b back byte for byte.
func splitLines(b []byte) [][]byte {
	var lines [][]byte
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			lines = append(lines, b)
			break
		}
		lines = append(lines, b[:i+1])
		b = b[i+1:]
	}
	return lines
}

// maxWork bounds a diff's cost ((n+m)·d steps): past it two files are
// treated as wholly different, which makes a merge of them a conflict
// rather than a stall.
const maxWork = 4 << 20

// matches returns, for every line of a, the index of the line of b it is
// paired with in a shortest edit script (Myers' greedy algorithm), or -1.
// The pairing is increasing: a longest common subsequence.
// (A diff whose (n+m)·d would pass maxWork pairs nothing in the span
// between the common prefix and suffix: its trace would take too much
// memory.)
func matches(a, b [][]byte) []int {
	m := make([]int, len(a))
	for i := range m {
		m[i] = -1
	}
	// Common prefix and suffix are paired without search.
	pre := 0
	for pre < len(a) && pre < len(b) && bytes.Equal(a[pre], b[pre]) {
		m[pre] = pre
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && bytes.Equal(a[len(a)-1-suf], b[len(b)-1-suf]) {
		m[len(a)-1-suf] = len(b) - 1 - suf
		suf++
	}
	myers(a[pre:len(a)-suf], b[pre:len(b)-suf], m[pre:len(a)-suf], pre)
	return m
}

// myers pairs the lines of a and b (offset by off in b's numbering) into m.
func myers(a, b [][]byte, m []int, off int) {
	n, k := len(a), len(b)
	if n == 0 || k == 0 {
		return
	}
	max := n + k
	v := make([]int, 2*max+2)
	var trace [][]int
	for d := 0; d <= max; d++ {
		if (n+k)*d > maxWork {
			return // no pairing: the whole span differs
		}
		trace = append(trace, append([]int(nil), v...))
		for diag := -d; diag <= d; diag += 2 {
			x := nextX(v, diag, d, max)
			y := x - diag
			for x < n && y < k && bytes.Equal(a[x], b[y]) {
				x, y = x+1, y+1
			}
			v[diag+max] = x
			if x >= n && y >= k {
				backtrack(a, trace, diag, d, n, max, m, off)
				return
			}
		}
	}
}

// nextX is where diagonal diag starts at step d: one down from diag+1 or
// one right from diag-1, whichever reaches further.
func nextX(v []int, diag, d, max int) int {
	if diag == -d || (diag != d && v[diag-1+max] < v[diag+1+max]) {
		return v[diag+1+max]
	}
	return v[diag-1+max] + 1
}

// backtrack walks the recorded steps back from (n, n-diag) and records
// every diagonal (a pair of equal lines) in m.
func backtrack(a [][]byte, trace [][]int, diag, d, n, max int, m []int, off int) {
	x := n
	for ; d > 0; d-- {
		v := trace[d]
		prev := diag - 1
		if diag == -d || (diag != d && v[diag-1+max] < v[diag+1+max]) {
			prev = diag + 1
		}
		px := v[prev+max]
		// The snake from the step's end back to (sx, sx-diag).
		sx := px
		if prev == diag-1 {
			sx = px + 1
		}
		for x > sx {
			x--
			m[x] = x - diag + off
		}
		x, diag = px, prev
	}
	for x > 0 { // the first snake, from (0, 0)
		x--
		m[x] = x - diag + off
	}
}
