package treediff

import (
	"bytes"
	"fmt"
	"strings"
)

// UnifiedDiff returns a unified diff (as `diff -u` prints it) turning a
// into b, with context lines of context around each change, or "" when the
// two are equal. It finds a shortest edit script with Myers' algorithm up to
// maxEditDistance differences; past that, where the search would cost
// seconds and gigabytes on a file the API accepts, the script stays valid
// but may change more lines than it needs to (see myers).
//
// Hand-written on purpose (docs/benchmarks.md, "2026-11-27: library
// choices", BenchmarkUnifiedDiff): github.com/aymanbagabas/go-udiff v0.4.1,
// tried in its place, bounds its search near 100 differences, so its diffs
// grow coarse early (100 one-line edits in 10,000 lines: 5,787 lines
// changed instead of 129), and its hunk headers are wrong for empty ranges
// without context and after a hunk that joins two changes.
func UnifiedDiff(a, b []byte, nameA, nameB string, context int) string {
	if string(a) == string(b) {
		return ""
	}
	if context < 0 {
		context = 0
	}
	al, bl := splitLines(a), splitLines(b)
	ops := myers(al, bl)

	var sb strings.Builder
	fmt.Fprintf(&sb, "--- %s\n+++ %s\n", nameA, nameB)
	for i := 0; i < len(ops); {
		// Skip to the next change; start the hunk context lines before it.
		if ops[i].kind == ' ' {
			i++
			continue
		}
		start := max(i-context, 0)
		end := i
		for end < len(ops) {
			if ops[end].kind != ' ' {
				end++
				continue
			}
			// A run of equal lines: does the hunk end here?
			run := end
			for run < len(ops) && ops[run].kind == ' ' {
				run++
			}
			if run == len(ops) || run-end > 2*context {
				end = min(end+context, len(ops))
				break
			}
			end = run
		}
		writeHunk(&sb, ops[start:end], al, bl)
		i = end
	}
	return sb.String()
}

// edit is one line of the script: ' ' keeps a[ai] (= b[bi]), '-' drops
// a[ai], '+' inserts b[bi]. ai and bi are also the positions in each file.
type edit struct {
	kind   byte
	ai, bi int
}

func writeHunk(sb *strings.Builder, ops []edit, a, b []string) {
	var na, nb int
	for _, o := range ops {
		if o.kind != '+' {
			na++
		}
		if o.kind != '-' {
			nb++
		}
	}
	fmt.Fprintf(sb, "@@ -%s +%s @@\n", hunkRange(ops[0].ai, na), hunkRange(ops[0].bi, nb))
	for _, o := range ops {
		line := ""
		if o.kind == '+' {
			line = b[o.bi]
		} else {
			line = a[o.ai]
		}
		sb.WriteByte(o.kind)
		sb.WriteString(line)
		if !strings.HasSuffix(line, "\n") {
			sb.WriteString("\n\\ No newline at end of file\n")
		}
	}
}

// hunkRange prints a range as diff -u does: "start,count", the count left
// out when it is 1, and an empty range named by the line before it.
func hunkRange(pos, n int) string {
	switch n {
	case 0:
		return fmt.Sprintf("%d,0", pos)
	case 1:
		return fmt.Sprintf("%d", pos+1)
	}
	return fmt.Sprintf("%d,%d", pos+1, n)
}

// splitLines splits after each newline; the last line may lack one.
func splitLines(s []byte) []string {
	var out []string
	for len(s) > 0 {
		// bytes, not strings.IndexByte(string(s)): that conversion copied
		// the rest of the file at every line (1.6 GB and 3.5 s for 10,000
		// lines, BenchmarkUnifiedDiff).
		i := bytes.IndexByte(s, '\n')
		if i < 0 {
			out = append(out, string(s))
			break
		}
		out = append(out, string(s[:i+1]))
		s = s[i+1:]
	}
	return out
}

// maxEditDistance bounds the differences myers looks for. Its time grows
// with the file times D and its memory with D², so unbounded, a sandbox
// that rewrote a 256 KiB file whole (D = 16,382) and asked for its diff cost
// the daemon 3.2–3.6 s and 2.2 GB (up to 20 s on a loaded machine). At 1,500
// that diff takes 29–36 ms and 25 MB (BenchmarkUnifiedDiff's
// 256KiB/rewritten, load 2 on 2 cores; 2,000 took ~57 ms and 40 MB), while
// the diffs of edited source stay exact well past what an agent's turn
// makes (1,000 one-line edits in 10,000 lines: D = 1,280).
const maxEditDistance = 1500

// myers returns a shortest edit script from a to b (E. Myers, "An O(ND)
// difference algorithm", 1986), deletions before insertions in each change.
// Past maxEditDistance differences it stops looking: the script keeps the
// path that got furthest and replaces what is left in one change
// (replaceRest), valid but no longer shortest.
func myers(a, b []string) []edit {
	n, m := len(a), len(b)
	maxD := min(n+m, maxEditDistance)
	off := maxD + 1
	v := make([]int, 2*maxD+3)
	// trace[d] keeps the frontier before step d on the diagonals -d..d only,
	// the ones step d reads: copying all of v made the trace grow as
	// D·(N+M) (46 MB for 100 edits in 10,000 lines) instead of D².
	var trace [][]int
	for d := 0; d <= maxD; d++ {
		trace = append(trace, append([]int(nil), v[off-d:off+d+1]...))
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
				x = v[off+k+1] // down: an insertion
			} else {
				x = v[off+k-1] + 1 // right: a deletion
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x, y = x+1, y+1
			}
			v[off+k] = x
			if x >= n && y >= m {
				return backtrack(trace, d, n, m)
			}
		}
	}
	return replaceRest(a, b, furthestPath(trace, v[off-maxD:off+maxD+1], maxD, n, m))
}

// furthestPath backtracks from the point of the last frontier v (diagonals
// -d..d) nearest the end, ignoring points past either file's end (the
// search does not stop at the edges), and drops the path's last change, so
// that the change replaceRest adds does not follow an insertion.
func furthestPath(trace [][]int, v []int, d, n, m int) []edit {
	bestX, bestK := -1, 0
	for k := -d; k <= d; k += 2 {
		x := v[d+k]
		if y := x - k; x <= n && y <= m && (bestX < 0 || 2*x-k > 2*bestX-bestK) {
			bestX, bestK = x, k
		}
	}
	if bestX < 0 {
		return nil
	}
	path := backtrack(trace, d, bestX, bestX-bestK)
	for len(path) > 0 && path[len(path)-1].kind != ' ' {
		path = path[:len(path)-1]
	}
	return path
}

// replaceRest finishes the edit script path (a prefix of one, ending where a
// and b last agreed) with the lines after it: those a and b end with alike,
// the rest of a deleted and the rest of b inserted.
func replaceRest(a, b []string, path []edit) []edit {
	x, y := 0, 0
	if len(path) > 0 {
		last := path[len(path)-1]
		x, y = last.ai+1, last.bi+1
	}
	n, m := len(a), len(b)
	for x < n && y < m && a[x] == b[y] {
		path = append(path, edit{' ', x, y})
		x, y = x+1, y+1
	}
	suffix := 0
	for suffix < n-x && suffix < m-y && a[n-1-suffix] == b[m-1-suffix] {
		suffix++
	}
	for ; x < n-suffix; x++ {
		path = append(path, edit{'-', x, y})
	}
	for ; y < m-suffix; y++ {
		path = append(path, edit{'+', x, y})
	}
	for ; x < n; x, y = x+1, y+1 {
		path = append(path, edit{' ', x, y})
	}
	return path
}

// backtrack walks the saved frontiers from (n, m) back to (0, 0).
func backtrack(trace [][]int, d, n, m int) []edit {
	var rev []edit
	x, y := n, m
	for ; d > 0; d-- {
		v, off := trace[d], d // the frontier before step d, diagonal k at off+k
		k := x - y
		var prevK int
		if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
			prevK = k + 1
		} else {
			prevK = k - 1
		}
		prevX := v[off+prevK]
		prevY := prevX - prevK
		for x > prevX && y > prevY {
			x, y = x-1, y-1
			rev = append(rev, edit{' ', x, y})
		}
		if x == prevX {
			y--
			rev = append(rev, edit{'+', x, y})
		} else {
			x--
			rev = append(rev, edit{'-', x, y})
		}
	}
	for x > 0 && y > 0 {
		x, y = x-1, y-1
		rev = append(rev, edit{' ', x, y})
	}
	out := make([]edit, len(rev))
	for i, e := range rev {
		out[len(rev)-1-i] = e
	}
	return out
}
