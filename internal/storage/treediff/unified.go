package treediff

import (
	"bytes"
	"fmt"
	"strings"
)

// UnifiedDiff returns a unified diff (as `diff -u` prints it) turning a
// into b, with context lines of context around each change, or "" when the
// two are equal. It is meant for small text files: it finds a shortest
// edit script with Myers' algorithm, whose time grows with the file size
// times the number of differences D, and its memory with D².
//
// Hand-written on purpose (measured 2026-11-27, docs/benchmarks.md,
// BenchmarkUnifiedDiff): github.com/aymanbagabas/go-udiff v0.4.1, the
// maintained copy of x/tools' diff, is no faster on what the diff API
// sees (1,000 and 10,000 lines with 1–100 small edits: medians 2.6–40 ms
// here, 3.5–100 ms there, about the same memory), and its output is not this
// one's: in 23 % of small random edits it picks another edit script of
// the same length, and with no context it writes hunk headers patch(1)
// rejects ("@@ -2 +3 @@" for an insertion). It does bound the cost of a
// file rewritten whole, where Myers' D is the file: 256 KiB of new
// 32-byte lines took 20 s and 2.1 GB here, 0.12 s and 7 MB there.
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

// myers returns a shortest edit script from a to b (E. Myers, "An O(ND)
// difference algorithm", 1986), deletions before insertions in each change.
func myers(a, b []string) []edit {
	n, m := len(a), len(b)
	maxD := n + m
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
	return nil // unreachable: d = n+m always reaches the end
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
