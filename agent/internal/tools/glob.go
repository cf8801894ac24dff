package tools

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

const maxGlobResults = 1000

type globParams struct {
	Pattern string `json:"pattern"`
	Path    string `json:"path"`
}

func globTool() *tool {
	return define("glob",
		"Find files by name pattern. `*` matches within one path segment, `**` matches any number of "+
			"directories, `?` one character, `[abc]` a set, `{ts,tsx}` alternatives: `**/*.go` finds Go files at "+
			"any depth, `src/**/test_*.py` under src, `*.md` only directly in the search directory. Patterns are "+
			"relative to path (or absolute). Hidden files are included; .git directories are skipped unless the "+
			"pattern names them; symlinked directories, and /proc, /sys and /dev from above, are not entered. Returns absolute paths of matching files, "+
			"most recently modified first, at most 1000; a pattern ending in / matches directories instead.",
		[]param{
			str("pattern", "The glob pattern, e.g. **/*.ts or src/**/*.{js,jsx}.").req(),
			str("path", "The directory to search: absolute, or relative to the call's directory (by default the user's home). Default: the call's directory."),
		},
		runGlob)
}

type globHit struct {
	path  string
	mtime time.Time
}

func runGlob(ctx context.Context, c *call, p globParams) Result {
	base, err := c.absOr(p.Path)
	if err != nil {
		return fail("path: %v", err)
	}
	if p.Path != "" {
		if fi, err := os.Stat(base); err != nil {
			return fail("%s", errText("search", base, err))
		} else if !fi.IsDir() {
			return fail("%s is not a directory; path must be the directory to search", base)
		}
	}
	pattern := p.Pattern
	if strings.HasPrefix(pattern, "/") {
		base, pattern = "/", strings.TrimLeft(pattern, "/")
	}
	wantDirs := strings.HasSuffix(pattern, "/")
	g, err := compileGlob(strings.TrimRight(pattern, "/"))
	if err != nil {
		return fail("invalid glob pattern %s", err)
	}
	root := filepath.Join(append([]string{base}, g.takeLiteralPrefix()...)...)
	if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
		return ok("No files match %s in %s (%s is not a directory)", p.Pattern, base, root)
	}
	intoGit := g.mentions(".git")

	var mu sync.Mutex
	var hits []globHit
	w := &treeWalk{
		enter: func(rel, name string) bool {
			return (name != ".git" || intoGit) && g.canEnter(rel)
		},
		visit: func(_ int, e *entry) {
			if (e.typ == fs.ModeDir) != wantDirs || !g.match(e.rel) {
				return
			}
			hit := globHit{path: e.path(), mtime: e.modTime()}
			if wantDirs {
				hit.path += "/"
			}
			mu.Lock()
			hits = append(hits, hit)
			mu.Unlock()
		},
	}
	w.run(ctx, root)
	if ctx.Err() != nil {
		return fail("cancelled")
	}
	what := "files"
	if wantDirs {
		what = "directories"
	}
	if len(hits) == 0 {
		return ok("No %s match %s in %s", what, p.Pattern, base)
	}
	sort.Slice(hits, func(i, j int) bool {
		if !hits[i].mtime.Equal(hits[j].mtime) {
			return hits[i].mtime.After(hits[j].mtime)
		}
		return hits[i].path < hits[j].path
	})
	var b strings.Builder
	for i, h := range hits {
		if i == maxGlobResults {
			break
		}
		b.WriteString(h.path)
		b.WriteByte('\n')
	}
	if len(hits) > maxGlobResults {
		fmt.Fprintf(&b, "[%d %s match; showing the %d most recently modified. Narrow the pattern or the path to see the rest]\n",
			len(hits), what, maxGlobResults)
	}
	if n := w.unreadable.Load(); n > 0 {
		fmt.Fprintf(&b, "[%s could not be read and were skipped]\n", plural(int(n), "directory", "directories"))
	}
	return ok("%s", strings.TrimSuffix(b.String(), "\n"))
}
