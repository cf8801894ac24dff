package linemerge

import (
	"bytes"
	"fmt"
	"math/rand"
	"strings"
	"testing"
)

func TestMerge(t *testing.T) {
	base := "a\nb\nc\nd\ne\nf\ng\n"
	cases := []struct {
		name, ours, theirs string
		style              Style
		want               string
		conflicts          int
	}{
		{"one side", "a\nB\nc\nd\ne\nf\ng\n", base, Markers, "a\nB\nc\nd\ne\nf\ng\n", 0},
		{"other side", base, "a\nb\nc\nd\ne\nF\ng\n", Markers, "a\nb\nc\nd\ne\nF\ng\n", 0},
		{"both apart", "a\nB\nc\nd\ne\nf\ng\n", "a\nb\nc\nd\ne\nF\ng\n", Markers, "a\nB\nc\nd\ne\nF\ng\n", 0},
		{"same change", "a\nX\nc\nd\ne\nf\ng\n", "a\nX\nc\nd\ne\nf\ng\n", Markers, "a\nX\nc\nd\ne\nf\ng\n", 0},
		{"insert and delete", "a\nb\nc\nnew\nd\ne\nf\ng\n", "a\nb\nc\nd\ne\ng\n", Markers, "a\nb\nc\nnew\nd\ne\ng\n", 0},
		{"conflict markers", "a\nO\nc\nd\ne\nf\ng\n", "a\nT\nc\nd\ne\nf\ng\n", Markers,
			"a\n<<<<<<< ours\nO\n=======\nT\n>>>>>>> theirs\nc\nd\ne\nf\ng\n", 1},
		{"conflict ours", "a\nO\nc\nd\ne\nf\ng\n", "a\nT\nc\nd\ne\nf\ng\n", Ours, "a\nO\nc\nd\ne\nf\ng\n", 1},
		{"conflict theirs", "a\nO\nc\nd\ne\nf\ng\n", "a\nT\nc\nd\ne\nf\ng\n", Theirs, "a\nT\nc\nd\ne\nf\ng\n", 1},
		{"conflict union", "a\nO\nc\nd\ne\nf\ng\n", "a\nT\nc\nd\ne\nf\ng\n", Union, "a\nO\nT\nc\nd\ne\nf\ng\n", 1},
		{"both append", base + "o\n", base + "t\n", Markers, base + "<<<<<<< ours\no\n=======\nt\n>>>>>>> theirs\n", 1},
		{"no final newline", "a\nb\nc\nd\ne\nf\nO", "a\nb\nc\nd\ne\nf\nT", Markers,
			"a\nb\nc\nd\ne\nf\n<<<<<<< ours\nO\n=======\nT\n>>>>>>> theirs\n", 1},
		{"emptied", "", base, Markers, "", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Merge([]byte(base), []byte(c.ours), []byte(c.theirs), c.style)
			if string(got.Data) != c.want || got.Conflicts != c.conflicts {
				t.Errorf("got %q (%d conflicts), want %q (%d)", got.Data, got.Conflicts, c.want, c.conflicts)
			}
		})
	}
}

// TestMergeRandom checks, on random edits of the two halves of a file
// (two untouched lines apart), that a side merged with an unchanged other
// side is itself, and that both merge cleanly into both edits.
func TestMergeRandom(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for n := 0; n < 200; n++ {
		var lines []string
		for i := 0; i < 40; i++ {
			lines = append(lines, fmt.Sprintf("line %d %d\n", i, r.Intn(3)))
		}
		base := strings.Join(lines, "")
		head, tail := edit(r, lines[:19], "o"), edit(r, lines[21:], "t")
		ours := strings.Join(append(append([]string(nil), head...), lines[19:]...), "")
		theirs := strings.Join(append(append([]string(nil), lines[:21]...), tail...), "")
		both := strings.Join(head, "") + lines[19] + lines[20] + strings.Join(tail, "")
		got := Merge([]byte(base), []byte(ours), []byte(base), Markers)
		if string(got.Data) != ours || got.Conflicts != 0 {
			t.Fatalf("ours vs unchanged: got %q", got.Data)
		}
		got = Merge([]byte(base), []byte(base), []byte(theirs), Markers)
		if string(got.Data) != theirs || got.Conflicts != 0 {
			t.Fatalf("unchanged vs theirs: got %q", got.Data)
		}
		got = Merge([]byte(base), []byte(ours), []byte(theirs), Markers)
		if string(got.Data) != both || got.Conflicts != 0 {
			t.Fatalf("got %q (%d conflicts), want %q", got.Data, got.Conflicts, both)
		}
	}
}

// edit changes, deletes and inserts a few lines.
func edit(r *rand.Rand, lines []string, tag string) []string {
	var out []string
	for i, l := range lines {
		switch r.Intn(8) {
		case 0:
			out = append(out, fmt.Sprintf("%s changed %d\n", tag, i))
		case 1: // deleted
		case 2:
			out = append(out, l, fmt.Sprintf("%s inserted %d\n", tag, i))
		default:
			out = append(out, l)
		}
	}
	return out
}

func TestMatchesIsCommonSubsequence(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	for n := 0; n < 300; n++ {
		a, b := randLines(r), randLines(r)
		m := matches(a, b)
		last, count := -1, 0
		for i, j := range m {
			if j < 0 {
				continue
			}
			if j <= last || !bytes.Equal(a[i], b[j]) {
				t.Fatalf("bad pairing %v of %q / %q", m, a, b)
			}
			last = j
			count++
		}
		if want := lcs(a, b); count != want {
			t.Fatalf("pairs %d lines, the longest common subsequence has %d (%q / %q)", count, want, a, b)
		}
	}
}

func randLines(r *rand.Rand) [][]byte {
	out := make([][]byte, r.Intn(12))
	for i := range out {
		out[i] = []byte{byte('a' + r.Intn(4)), '\n'}
	}
	return out
}

func lcs(a, b [][]byte) int {
	t := make([][]int, len(a)+1)
	for i := range t {
		t[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if bytes.Equal(a[i], b[j]) {
				t[i][j] = t[i+1][j+1] + 1
			} else {
				t[i][j] = max(t[i+1][j], t[i][j+1])
			}
		}
	}
	return t[0][0]
}
