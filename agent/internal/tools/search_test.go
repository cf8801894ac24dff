package tools

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestLs(t *testing.T) {
	e := newEnv(t)
	writeFile(t, e.home, "proj/b.txt", "hello")
	writeFile(t, e.home, "proj/src/main.go", "package main\n")
	writeFile(t, e.home, "proj/.git/HEAD", "ref")
	if err := os.Symlink("src/main.go", filepath.Join(e.home, "proj", "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(e.home, "proj", "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	got := mustOK(t, e.run(t, "ls", map[string]any{"path": "proj"}))
	want := e.home + "/proj/\n  .git/\n  b.txt  (5 B)\n  empty/\n  link -> src/main.go\n  src/"
	if got != want {
		t.Fatalf("depth 1:\n%s\nwant:\n%s", got, want)
	}
	got = mustOK(t, e.run(t, "ls", map[string]any{"path": "proj", "depth": 3}))
	want = e.home + "/proj/\n  .git/\n  b.txt  (5 B)\n  empty/\n  link -> src/main.go\n  src/\n    main.go  (13 B)"
	if got != want {
		t.Fatalf("depth 3 (.git not entered):\n%s\nwant:\n%s", got, want)
	}
	contains(t, mustOK(t, e.run(t, "ls", map[string]any{"path": "proj/empty"})), "(empty directory)")
	mustFail(t, e.run(t, "ls", map[string]any{"path": "nope"}), "no such file or directory")
}

func TestGlob(t *testing.T) {
	e := newEnv(t)
	base := time.Now().Add(-time.Hour)
	for i, rel := range []string{"a.go", "pkg/b.go", "pkg/deep/c.go", "pkg/deep/c_test.go", "web/x.ts", "web/y.tsx", ".git/hooks/h.go", "README.md"} {
		p := writeFile(t, e.home, rel, "x")
		mt := base.Add(time.Duration(i) * time.Minute)
		if err := os.Chtimes(p, mt, mt); err != nil {
			t.Fatal(err)
		}
	}
	h := e.home + "/"
	for _, tc := range []struct {
		pattern, path string
		want          []string // newest first
	}{
		{"**/*.go", "", []string{h + "pkg/deep/c_test.go", h + "pkg/deep/c.go", h + "pkg/b.go", h + "a.go"}},
		{"*.go", "", []string{h + "a.go"}},
		{"pkg/**/c*.go", "", []string{h + "pkg/deep/c_test.go", h + "pkg/deep/c.go"}},
		{"**/*.{ts,tsx}", "", []string{h + "web/y.tsx", h + "web/x.ts"}},
		{"*.ts", "web", []string{h + "web/x.ts"}},
		{"**/", "pkg", []string{h + "pkg/deep/"}},
		{".git/**/*.go", "", []string{h + ".git/hooks/h.go"}},
		{e.home + "/pkg/*/c.go", "", []string{h + "pkg/deep/c.go"}},
	} {
		got := mustOK(t, e.run(t, "glob", map[string]any{"pattern": tc.pattern, "path": tc.path}))
		if got != strings.Join(tc.want, "\n") {
			t.Errorf("glob %q in %q:\n%s\nwant:\n%s", tc.pattern, tc.path, got, strings.Join(tc.want, "\n"))
		}
	}
	contains(t, mustOK(t, e.run(t, "glob", map[string]any{"pattern": "**/*.rs"})), "No files match")
	mustFail(t, e.run(t, "glob", map[string]any{"pattern": "[abc"}), "invalid glob pattern")
	mustFail(t, e.run(t, "glob", map[string]any{"pattern": "a**b/*.go"}), "** must be a whole path segment")
	mustFail(t, e.run(t, "glob", map[string]any{"pattern": "*", "path": "nope"}), "no such file or directory")
}

func TestGrep(t *testing.T) {
	e := newEnv(t)
	writeFile(t, e.home, "src/a.go", "package a\n\n// TODO: one\nfunc A() {}\n\nfunc B() {} // todo two\n")
	writeFile(t, e.home, "src/b.txt", "nothing\nTODO three\n")
	writeFile(t, e.home, "src/bin.dat", "TODO\x00binary")
	writeFile(t, e.home, "src/.git/objects/x", "TODO in git\n")
	writeFile(t, e.home, "src/.hidden", "TODO hidden\n")
	// Symlinks are not followed: neither one leading out of the searched
	// tree nor one to a file in it.
	outside := t.TempDir()
	writeFile(t, outside, "secret.txt", "TODO outside\n")
	if err := os.Symlink(outside, filepath.Join(e.home, "src", "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("b.txt", filepath.Join(e.home, "src", "b-link.txt")); err != nil {
		t.Fatal(err)
	}
	s := e.home + "/src/"

	got := mustOK(t, e.run(t, "grep", map[string]any{"pattern": "TODO", "path": "src"}))
	want := s + ".hidden:1:TODO hidden\n" + s + "a.go:3:// TODO: one\n" + s + "b.txt:2:TODO three\n[3 matching lines in 3 files; skipped 1 binary file]"
	if got != want {
		t.Fatalf("plain:\n%s\nwant:\n%s", got, want)
	}
	got = mustOK(t, e.run(t, "grep", map[string]any{"pattern": "todo", "path": "src", "ignoreCase": true, "glob": "*.go"}))
	if got != s+"a.go:3:// TODO: one\n"+s+"a.go:6:func B() {} // todo two\n[2 matching lines in 1 file]" {
		t.Fatalf("ignoreCase+glob: %q", got)
	}
	got = mustOK(t, e.run(t, "grep", map[string]any{"pattern": `^func \w+`, "path": "src/a.go", "contextLines": 1}))
	want = s + "a.go-3-// TODO: one\n" + s + "a.go:4:func A() {}\n" + s + "a.go-5-\n" + s + "a.go:6:func B() {} // todo two\n[2 matching lines in 1 file]"
	if got != want {
		t.Fatalf("context:\n%s\nwant:\n%s", got, want)
	}
	got = mustOK(t, e.run(t, "grep", map[string]any{"pattern": "TODO", "path": "src", "maxResults": 2}))
	contains(t, got, "showing the first 2 matching lines", "there are more")
	if n := len(regexp.MustCompile(`(?m):\d+:`).FindAllString(got, -1)); n != 2 {
		t.Fatalf("maxResults: %q", got)
	}
	contains(t, mustOK(t, e.run(t, "grep", map[string]any{"pattern": "nomatch", "path": "src"})), "No matches for nomatch", "skipped 1 binary file")
	mustFail(t, e.run(t, "grep", map[string]any{"pattern": "(unclosed"}), "invalid regular expression", "missing closing )")
	mustFail(t, e.run(t, "grep", map[string]any{"pattern": "x", "path": "nope"}), "no such file or directory")
	got = mustOK(t, e.run(t, "grep", map[string]any{"pattern": "TODO", "path": "src", "glob": "src/**/*.txt"}))
	if got != "No matches for TODO in "+e.home+"/src" {
		// the glob is relative to path: "src/**" under src matches nothing
		t.Fatalf("path glob: %q", got)
	}
	// (?i) matches the Kelvin sign as k: the literal prefilter must not hide it.
	writeFile(t, e.home, "units/k.txt", "273 \u212Aelvin\n")
	got = mustOK(t, e.run(t, "grep", map[string]any{"pattern": "kelvin", "path": "units", "ignoreCase": true}))
	contains(t, got, "k.txt:1:273 \u212Aelvin")
	got = mustOK(t, e.run(t, "grep", map[string]any{"pattern": "TODO", "path": "src", "glob": "**/*.txt"}))
	if got != s+"b.txt:2:TODO three\n[1 matching line in 1 file]" {
		t.Fatalf("path glob: %q", got)
	}
}

// TestGrepMatchesReference compares grep, window by window over files
// bigger than a window, with a line-by-line reference.
func TestGrepMatchesReference(t *testing.T) {
	if testing.Short() {
		t.Skip("18 greps of 150,000 lines beside a slow reference (half a minute under -race): not in -short mode")
	}
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(1, 2))
	words := []string{"gamma", "", "x"}
	for i := range 40 {
		words = append(words, fmt.Sprintf("w%d", i))
	}
	for f := range 4 {
		var b strings.Builder
		// Some files span several windows; one lacks a final newline.
		lines := []int{50, 3000, 60000, 90000}[f]
		for i := range lines {
			n := rng.IntN(40)
			if rng.IntN(50) == 0 {
				n = 200 // an occasional long line
			}
			for range n/5 + 1 {
				b.WriteString(words[rng.IntN(len(words))])
				b.WriteByte(' ')
			}
			if rng.IntN(300) == 0 {
				b.WriteString("a needle ")
			}
			if f != 2 || i != lines-1 {
				b.WriteByte('\n')
			}
		}
		writeFile(t, e.home, fmt.Sprintf("tree/f%d.txt", f), b.String())
	}
	defer func(n int) { maxGrepOutput = n }(maxGrepOutput)
	maxGrepOutput = 1 << 30
	for _, ctx := range []int{0, 1, 3} {
		for _, pat := range []string{"needle", `^gamma`, `x $`, `^ $`, `(?i)A NEEDLE`, `gamma \w+ (x|w1) `} {
			got := mustOK(t, e.run(t, "grep", map[string]any{"pattern": pat, "path": "tree", "contextLines": ctx, "maxResults": 5000}))
			want := referenceGrep(t, filepath.Join(e.home, "tree"), pat, ctx, 5000)
			if got != want {
				gl, wl := strings.Split(got, "\n"), strings.Split(want, "\n")
				for i := range min(len(gl), len(wl)) {
					if gl[i] != wl[i] {
						t.Fatalf("pattern %q context %d: line %d differs:\n got %q\nwant %q", pat, ctx, i, gl[i], wl[i])
					}
				}
				t.Fatalf("pattern %q context %d: %d lines, want %d", pat, ctx, len(gl), len(wl))
			}
		}
	}
}

// referenceGrep is grep's answer computed the slow, obvious way.
func referenceGrep(t *testing.T, dir, pattern string, context, limit int) string {
	re := regexp.MustCompile(pattern)
	names, _ := filepath.Glob(filepath.Join(dir, "*"))
	var b strings.Builder
	shown, files := 0, 0
	for _, name := range names {
		lines := strings.Split(readFile(t, name), "\n")
		if strings.HasSuffix(readFile(t, name), "\n") {
			lines = lines[:len(lines)-1]
		}
		var out []string
		last := -1
		matched := 0
		for i, l := range lines {
			if !re.MatchString(l) || shown == limit {
				continue
			}
			from := max(i-context, last+1)
			if last >= 0 && from > last+1 && context > 0 {
				out = append(out, "--")
			}
			for k := from; k < i; k++ {
				out = append(out, fmt.Sprintf("%s-%d-%s", name, k+1, clip([]byte(lines[k]))))
			}
			out = append(out, fmt.Sprintf("%s:%d:%s", name, i+1, clip([]byte(l))))
			last = i
			shown++
			matched++
			// After context, unless the next match comes first (it then
			// prints these lines itself).
			for k := i + 1; k <= i+context && k < len(lines); k++ {
				if re.MatchString(lines[k]) && shown < limit {
					break
				}
				out = append(out, fmt.Sprintf("%s-%d-%s", name, k+1, clip([]byte(lines[k]))))
				last = k
			}
		}
		if matched == 0 {
			continue
		}
		if context > 0 && files > 0 {
			b.WriteString("--\n")
		}
		files++
		b.WriteString(strings.Join(out, "\n") + "\n")
	}
	return strings.TrimSuffix(b.String(), "\n") + fmt.Sprintf("\n[%s in %s]", plural(shown, "matching line", "matching lines"), plural(files, "file", "files"))
}

// TestGrep100kFiles greps the benchmark's tree of 100,000 files (1 in 1000
// holds the needle) with a binary file and a .git directory holding it too:
// every match is found, each once, and nothing is read where it must not be.
func TestGrep100kFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and greps 100,000 files (a minute under -race): not in -short mode")
	}
	e := newEnv(t)
	root := filepath.Join(e.home, "big")
	makeTree(t, root)
	writeFile(t, root, "pkg000/blob.bin", "func needle_4711() {}\x00\x01")
	writeFile(t, root, ".git/objects/needle", "func needle_4711() {}\n")

	got := mustOK(t, e.run(t, "grep", map[string]any{"pattern": `func needle_\d+\(`, "path": "big"}))
	contains(t, got, "[100 matching lines in 100 files; skipped 1 binary file]")
	seen := map[string]bool{}
	for line := range strings.Lines(got) {
		if strings.HasPrefix(line, "[") {
			continue
		}
		file, _, ok := strings.Cut(line, ":")
		if !ok || !strings.HasSuffix(file, ".go") || strings.Contains(file, "/.git/") || seen[file] {
			t.Fatalf("unexpected line %q", line)
		}
		seen[file] = true
	}
	if len(seen) != 100 {
		t.Fatalf("%d files matched, want 100", len(seen))
	}
	got = mustOK(t, e.run(t, "grep", map[string]any{"pattern": "NEEDLE_4711", "path": "big", "ignoreCase": true, "glob": "pkg00*/**/*.go", "maxResults": 5}))
	contains(t, got, "showing the first 5 matching lines")
	if n := strings.Count(got, "needle_4711"); n != 5 {
		t.Fatalf("maxResults 5 in pkg00*: %d matches shown:\n%s", n, got)
	}
}
