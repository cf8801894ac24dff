package treediff

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"
)

// sourceLike makes n lines that look like code, each unique enough.
func sourceLike(rng *rand.Rand, n int) []string {
	lines := make([]string, n)
	for i := range lines {
		switch rng.Intn(4) {
		case 0:
			lines[i] = "\n"
		case 1:
			lines[i] = "}\n"
		default:
			lines[i] = fmt.Sprintf("\tx%d := compute(%d, %q)\n", rng.Intn(1000), i, "abc")
		}
	}
	return lines
}

// smallEdits inserts, deletes or changes edits single lines.
func smallEdits(rng *rand.Rand, lines []string, edits int) []string {
	out := append([]string(nil), lines...)
	for range edits {
		pos := rng.Intn(len(out))
		switch rng.Intn(3) {
		case 0:
			out = append(out[:pos], append([]string{"// added\n"}, out[pos:]...)...)
		case 1:
			out = append(out[:pos], out[pos+1:]...)
		default:
			out[pos] = "changed()\n"
		}
	}
	return out
}

// diffCase is a pair of texts to diff.
type diffCase struct {
	name string
	a, b []byte
}

// diffCases are source-like files of 1,000 and 10,000 lines with 1, 10 and
// 100 small edits, a 2,000-line file rewritten whole and a 256 KiB one
// (wholeRewrite): the worst cases, where the edit script is as long as the
// files.
func diffCases() []diffCase {
	rng := rand.New(rand.NewSource(7))
	var cs []diffCase
	for _, n := range []int{1000, 10000} {
		base := sourceLike(rng, n)
		for _, e := range []int{1, 10, 100} {
			cs = append(cs, diffCase{fmt.Sprintf("%dlines/%dedits", n, e), []byte(strings.Join(base, "")), []byte(strings.Join(smallEdits(rng, base, e), ""))})
		}
	}
	a, b := sourceLike(rng, 2000), sourceLike(rng, 2000)
	cs = append(cs, diffCase{"2000lines/rewritten", []byte(strings.Join(a, "")), []byte(strings.Join(b, ""))})
	a256, b256 := wholeRewrite()
	return append(cs, diffCase{"256KiB/rewritten", a256, b256})
}

// wholeRewrite returns a file as large as the diff API reads
// (maxContentDiffFile in internal/server), 8,191 lines of 32 bytes, and
// another of new lines: the most differences the API can be asked for.
func wholeRewrite() (a, b []byte) {
	rng := rand.New(rand.NewSource(3))
	text := func() []byte {
		var sb strings.Builder
		for sb.Len() < 256<<10-32 {
			fmt.Fprintf(&sb, "%031x\n", rng.Uint64())
		}
		return []byte(sb.String())
	}
	return text(), text()
}

// BenchmarkUnifiedDiff times the content diff of one file as the diff API
// makes it (3 lines of context).
func BenchmarkUnifiedDiff(b *testing.B) {
	for _, c := range diffCases() {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				UnifiedDiff(c.a, c.b, "a", "b", 3)
			}
		})
	}
}
