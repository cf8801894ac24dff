package tools

import (
	"fmt"
	"testing"
)

// TestGlobMatch pins the pattern language the glob tool and grep's glob
// filter accept: what a pattern matches, and which directories the walk
// may enter for it.
func TestGlobMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern string
		match   []string
		noMatch []string
		enter   []string
		noEnter []string
	}{
		{"**/*.go", []string{"a.go", "x/a.go", "x/y/z/.a.go", ".go"}, []string{"a.gox", "x/a.txt", "a.go/b"}, []string{"x", "x/y"}, nil},
		{"*.go", []string{"a.go", ".hidden.go"}, []string{"x/a.go"}, nil, []string{"x"}},
		{"src/**/*.{js,jsx}", []string{"src/a.js", "src/x/b.jsx"}, []string{"a.js", "src/a.ts", "lib/a.js"}, []string{"src", "src/x/y"}, []string{"lib"}},
		{"{src/a,lib}/*.go", []string{"src/a/x.go", "lib/y.go"}, []string{"src/x.go", "src/b/x.go"}, []string{"src", "src/a", "lib"}, []string{"src/b", "lib/x", "other"}},
		{"a/{b,{c,d}}/e", []string{"a/b/e", "a/c/e", "a/d/e"}, []string{"a/{b,{c,d}}/e", "a/x/e"}, []string{"a/d"}, []string{"a/x"}},
		{"{a}.txt", []string{"{a}.txt"}, []string{"a.txt"}, nil, nil},
		{`\{a,b\}.txt`, []string{"{a,b}.txt"}, []string{"a.txt"}, nil, nil},
		{"[a-c]?.md", []string{"ax.md", "c1.md"}, []string{"dx.md", "a.md", "a/x.md"}, nil, nil},
		{"[^a]*", []string{"b", "bc"}, []string{"a", "ab"}, nil, nil},
		{"[!a]*", []string{"b", "bc"}, []string{"a", "ab"}, nil, nil}, // bash's negation too (path.Match read ! as a member)
		{`\*.txt`, []string{"*.txt"}, []string{"a.txt"}, nil, nil},
		{"x/**", []string{"x", "x/a", "x/a/b"}, []string{"y", "xa"}, []string{"x", "x/a"}, []string{"y"}},
		{"./a//b/*.c", []string{"a/b/c.c"}, []string{"b/c.c"}, []string{"a", "a/b"}, []string{"b"}},
		{"**/**/*.c", []string{"a.c", "x/y/a.c"}, nil, []string{"x"}, nil},
		{"*/src/*.c", []string{"m/src/a.c"}, []string{"src/a.c", "m/n/src/a.c"}, []string{"m", "m/src"}, []string{"m/lib", "m/src/x"}},
	} {
		g, err := compileGlob(tc.pattern)
		if err != nil {
			t.Fatalf("%q: %v", tc.pattern, err)
		}
		for _, p := range tc.match {
			if !g.match(p) {
				t.Errorf("%q should match %q", tc.pattern, p)
			}
		}
		for _, p := range tc.noMatch {
			if g.match(p) {
				t.Errorf("%q should not match %q", tc.pattern, p)
			}
		}
		for _, d := range tc.enter {
			if !g.canEnter(d) {
				t.Errorf("%q: the walk should enter %q", tc.pattern, d)
			}
		}
		for _, d := range tc.noEnter {
			if g.canEnter(d) {
				t.Errorf("%q: the walk should not enter %q", tc.pattern, d)
			}
		}
	}
	for _, bad := range []string{"[abc", `a\`, "a**b/*.go", "x/**c", "/", ""} {
		if _, err := compileGlob(bad); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
}

// BenchmarkGlobMatch matches the paths of a source tree the way grep's
// glob filter and the glob tool's walk do: one match per file.
func BenchmarkGlobMatch(b *testing.B) {
	var paths []string
	for d := range 20 {
		for f := range 50 {
			ext := []string{".go", ".ts", ".tsx", ".md", ".txt"}[f%5]
			paths = append(paths, fmt.Sprintf("pkg%02d/sub%d/deep/file%03d%s", d, f%4, f, ext))
		}
	}
	for _, pattern := range []string{"*.go", "**/*.go", "pkg0*/**/*.{ts,tsx}", "**/sub1/*/file0[0-4]?.md"} {
		g, err := compileGlob(pattern)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(pattern, func(b *testing.B) {
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				for _, p := range paths {
					if g.match(p) {
						n++
					}
				}
			}
			_ = n
		})
	}
}
