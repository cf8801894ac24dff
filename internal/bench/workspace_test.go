package bench

import (
	"strings"
	"testing"
)

func TestLayoutSizesAddUp(t *testing.T) {
	for _, tc := range []struct {
		files int
		total int64
	}{
		{1, 10}, {2, 1000}, {7, 1 << 20}, {999, 5 << 20}, {5000, 50 << 20}, {100000, 1 << 30},
	} {
		l := newLayout(tc.files, tc.total)
		var sum int64
		base := tc.total / int64(tc.files)
		minSize, maxSize := tc.total, int64(0)
		for i := 0; i < tc.files; i++ {
			s := l.size(i)
			if s <= 0 {
				t.Fatalf("%d files: file %d has size %d", tc.files, i, s)
			}
			sum += s
			minSize, maxSize = min(minSize, s), max(maxSize, s)
		}
		if sum != tc.total {
			t.Errorf("%d files: sizes add up to %d, want %d", tc.files, sum, tc.total)
		}
		if tc.files >= 1000 && (minSize > base/2 || maxSize < base*3/2) {
			t.Errorf("%d files: sizes %d..%d barely vary around %d", tc.files, minSize, maxSize, base)
		}
	}
}

func TestLayoutSpreadsFilesOverDirs(t *testing.T) {
	l := newLayout(5000, 50<<20)
	if l.dirs != 1000 {
		t.Fatalf("dirs = %d, want 1000", l.dirs)
	}
	perDir := map[string]int{}
	for i := 0; i < l.files; i++ {
		d, _, _ := strings.Cut(l.file(i), "/")
		perDir[d]++
	}
	if len(perDir) != 1000 || perDir["d0000"] != 5 || perDir["d0999"] != 5 {
		t.Errorf("files per dir: %d dirs, d0000 %d, d0999 %d", len(perDir), perDir["d0000"], perDir["d0999"])
	}
	if small := newLayout(10, 100); small.dirs != 10 {
		t.Errorf("10 files in %d dirs, want 10", small.dirs)
	}
}

func TestLayoutCreatesOneDirectoryAfterAnother(t *testing.T) {
	for _, files := range []int{10, 999, 5001} {
		l := newLayout(files, 1<<20)
		seen := make([]bool, files)
		lastDir, dirsDone := "", map[string]bool{}
		for i := range l.creationOrder() {
			if i < 0 || i >= files || seen[i] {
				t.Fatalf("%d files: index %d out of range or yielded twice", files, i)
			}
			seen[i] = true
			d, _, _ := strings.Cut(l.file(i), "/")
			if d != lastDir {
				if dirsDone[d] {
					t.Fatalf("%d files: directory %s comes back after %s", files, d, lastDir)
				}
				dirsDone[lastDir] = true
				lastDir = d
			}
		}
		for i, ok := range seen {
			if !ok {
				t.Fatalf("%d files: index %d never yielded", files, i)
			}
		}
	}
}

func TestRawTurnWritesWhereNoRecentTurnDid(t *testing.T) {
	l := newLayout(100000, 1<<30)
	dirsOf := func(paths []string) map[string]bool {
		out := map[string]bool{}
		for _, p := range paths {
			d, _, _ := strings.Cut(p, "/")
			out[d] = true
		}
		return out
	}
	for turn := 1; turn <= 1000; turn += 7 {
		raw := rawTurnPaths(l, turn)
		for j := 0; j < len(raw); j += 2 {
			if _, name, _ := strings.Cut(raw[j], "/"); !strings.HasPrefix(name, "raw") {
				t.Fatalf("raw turn %d makes %s: a turn could make it too", turn, raw[j])
			}
		}
		rawDirs := dirsOf(raw)
		for near := max(1, turn-200); near <= turn+200; near++ {
			for d := range dirsOf(turnPaths(l, near, false)) {
				if rawDirs[d] {
					t.Fatalf("raw turn %d writes %s, which turn %d writes too", turn, d, near)
				}
			}
		}
	}
}
