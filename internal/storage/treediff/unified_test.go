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
// patch(1).
func TestUnifiedDiffAppliesWithPatch(t *testing.T) {
	patch := testutil.RequireBinary(t, "patch")
	dir := t.TempDir()
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 60; i++ {
		a := randomText(rng)
		b := mutateText(rng, a)
		d := UnifiedDiff([]byte(a), []byte(b), "a", "b", rng.Intn(4))
		if (a == b) != (d == "") {
			t.Fatalf("case %d: equal=%t but diff %q", i, a == b, d)
		}
		if d == "" {
			continue
		}
		f := filepath.Join(dir, "f")
		if err := os.WriteFile(f, []byte(a), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(patch, "-s", "--no-backup-if-mismatch", f)
		cmd.Stdin = strings.NewReader(d)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("case %d: patch: %v: %s\ndiff:\n%s", i, err, out, d)
		}
		got, _ := os.ReadFile(f)
		if string(got) != b {
			t.Fatalf("case %d: patched file is\n%q\nwant\n%q\ndiff:\n%s", i, got, b, d)
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
