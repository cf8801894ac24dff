package treediff

import (
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warrenhq/warren/internal/testutil"
)

func TestUnifiedDiffEqual(t *testing.T) {
	if d := UnifiedDiff([]byte("a\nb\n"), []byte("a\nb\n"), "a", "b", 3); d != "" {
		t.Fatalf("equal inputs gave %q", d)
	}
	if d := UnifiedDiff(nil, nil, "a", "b", 3); d != "" {
		t.Fatalf("empty inputs gave %q", d)
	}
}

func TestUnifiedDiffExamples(t *testing.T) {
	tests := []struct {
		name string
		a, b string
		want string
	}{
		{"change", "1\n2\n3\n", "1\nX\n3\n", "--- a\n+++ b\n@@ -1,3 +1,3 @@\n 1\n-2\n+X\n 3\n"},
		{"add to empty", "", "x\n", "--- a\n+++ b\n@@ -0,0 +1 @@\n+x\n"},
		{"remove all", "x\ny\n", "", "--- a\n+++ b\n@@ -1,2 +0,0 @@\n-x\n-y\n"},
		{"no newline", "a\nb", "a\nc", "--- a\n+++ b\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n"},
		{"two hunks", "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n", "1\nA\n3\n4\n5\n6\n7\n8\nB\n10\n",
			"--- a\n+++ b\n@@ -1,3 +1,3 @@\n 1\n-2\n+A\n 3\n@@ -8,3 +8,3 @@\n 8\n-9\n+B\n 10\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := UnifiedDiff([]byte(tc.a), []byte(tc.b), "a", "b", 1)
			if got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

// TestUnifiedDiffAppliesWithPatch checks random diffs by applying them with
// patch(1), both ways and strictly (checkPatch), for every context size from
// none to the server's 3.
func TestUnifiedDiffAppliesWithPatch(t *testing.T) {
	patch := testutil.RequireBinary(t, "patch")
	dir := t.TempDir()
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 200; i++ {
		a := randomText(rng)
		b := mutateText(rng, a)
		context := i % 4
		d := UnifiedDiff([]byte(a), []byte(b), "a", "b", context)
		if (a == b) != (d == "") {
			t.Fatalf("case %d: equal=%t but diff %q", i, a == b, d)
		}
		if d == "" {
			continue
		}
		t.Run(fmt.Sprintf("case%d/context%d", i, context), func(t *testing.T) { checkPatch(t, patch, dir, a, b, d) })
	}
}

// TestUnifiedDiffWholeRewrite diffs a file as large as the diff API reads
// (maxContentDiffFile in internal/server), rewritten whole: the case where
// the edit script is as long as the file, far past maxEditDistance.
func TestUnifiedDiffWholeRewrite(t *testing.T) {
	patch := testutil.RequireBinary(t, "patch")
	a, b := wholeRewrite()
	d := UnifiedDiff(a, b, "a", "b", 3)
	checkPatch(t, patch, t.TempDir(), string(a), string(b), d)
}

// TestUnifiedDiffPastTheCap diffs pairs whose edit distance is just past
// maxEditDistance, with the differences spread over the file and at either
// end, and one twice past it, so the search stops partway and the rest
// becomes one replacement.
func TestUnifiedDiffPastTheCap(t *testing.T) {
	patch := testutil.RequireBinary(t, "patch")
	dir := t.TempDir()
	rng := rand.New(rand.NewSource(5))
	same := func(n int) []string {
		lines := make([]string, n)
		for i := range lines {
			lines[i] = fmt.Sprintf("same %d\n", i)
		}
		return lines
	}
	// Each changed line is one deletion and one insertion: two differences.
	changed := func(lines []string, at []int) string {
		out := append([]string(nil), lines...)
		for _, i := range at {
			out[i] = fmt.Sprintf("changed %d\n", i)
		}
		return strings.Join(out, "")
	}
	base := same(3 * maxEditDistance)
	perm := rng.Perm(len(base))
	var head, tail []int
	for i := range maxEditDistance/2 + 1 {
		head = append(head, i)
		tail = append(tail, len(base)-1-i)
	}
	a := strings.Join(base, "")
	for name, at := range map[string][]int{"spread": perm[:maxEditDistance/2+1], "head": head, "tail": tail, "twice": perm[:maxEditDistance]} {
		b := changed(base, at)
		for _, context := range []int{0, 3} {
			t.Run(fmt.Sprintf("%s/context%d", name, context), func(t *testing.T) {
				checkPatch(t, patch, dir, a, b, UnifiedDiff([]byte(a), []byte(b), "a", "b", context))
			})
		}
	}
}

// checkPatch applies diff d to a file holding a and expects b, then applies
// it in reverse to b and expects a: patch(1) places a hunk by its old-file
// numbers, so only the reverse run checks the new-file ones. It fails when
// patch has to move a hunk or drop context to make it apply.
func checkPatch(t *testing.T, patch, dir, a, b, d string) {
	t.Helper()
	for _, run := range []struct{ from, want, flag string }{{a, b, "--forward"}, {b, a, "--reverse"}} {
		f := filepath.Join(dir, "f")
		if err := os.WriteFile(f, []byte(run.from), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(patch, run.flag, "--fuzz=0", "--no-backup-if-mismatch", f)
		cmd.Stdin = strings.NewReader(d)
		out, err := cmd.CombinedOutput()
		if err != nil || strings.Contains(string(out), "offset") {
			t.Fatalf("patch %s: %v: %s\ndiff:\n%.2000s", run.flag, err, out, d)
		}
		got, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != run.want {
			t.Fatalf("patch %s gave\n%.2000q\nwant\n%.2000q\ndiff:\n%.2000s", run.flag, got, run.want, d)
		}
	}
}

func randomText(rng *rand.Rand) string {
	var sb strings.Builder
	for i, n := 0, rng.Intn(30); i < n; i++ {
		fmt.Fprintf(&sb, "line %d\n", rng.Intn(8))
	}
	if rng.Intn(4) == 0 {
		sb.WriteString("tail")
	}
	return sb.String()
}

func mutateText(rng *rand.Rand, s string) string {
	lines := splitLines([]byte(s))
	for i, n := 0, rng.Intn(5); i < n; i++ {
		switch pos := rng.Intn(len(lines) + 1); rng.Intn(3) {
		case 0:
			lines = append(lines[:pos], append([]string{fmt.Sprintf("new %d\n", rng.Intn(100))}, lines[pos:]...)...)
		case 1:
			if pos < len(lines) {
				lines = append(lines[:pos], lines[pos+1:]...)
			}
		case 2:
			if pos < len(lines) {
				lines[pos] = "changed\n"
			}
		}
	}
	return strings.Join(lines, "")
}
