package tools

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

const (
	defaultGrepResults = 200
	maxGrepResults     = 5000
	maxGrepContext     = 20
)

// maxGrepOutput bounds the answer; past it the answer says so. A variable
// so that a test can compare long answers whole.
var maxGrepOutput = 100_000

type grepParams struct {
	Pattern      string `json:"pattern"`
	Path         string `json:"path"`
	Glob         string `json:"glob"`
	IgnoreCase   bool   `json:"ignoreCase"`
	ContextLines int64  `json:"contextLines"`
	MaxResults   int64  `json:"maxResults"`
}

func grepTool() *tool {
	return define("grep",
		"Search file contents with a regular expression (Go RE2 syntax: no backreferences or lookaround; "+
			"escape ( ) [ ] { } . * + ? | \\ to match them literally). Searches a file, or every file below a "+
			"directory, line by line like grep -rn: each matching line comes as path:line:text, context lines as "+
			"path-line-text, with -- between groups. Binary files, .git directories and symlinks are skipped, and "+
			"/proc, /sys and /dev are not entered from above; hidden files are searched. Matching lines are listed in path order, at most maxResults of them "+
			"(default 200) with a note when there are more; lines are cut at 500 bytes.",
		[]param{
			str("pattern", "The regular expression to find, e.g. `func \\w+Handler` or `TODO|FIXME`.").req(),
			str("path", "A file or directory to search: absolute, or relative to the call's directory (by default the user's home). Default: the call's directory."),
			str("glob", "Only search files whose name matches this glob, e.g. *.go or *.{ts,tsx}; a glob with a / matches the path relative to path instead, e.g. src/**/*.py."),
			boolean("ignoreCase", "Match letters of either case. Default false."),
			integer("contextLines", "Show this many lines before and after each match. Default 0, at most 20.", 0, maxGrepContext),
			integer("maxResults", "Stop after this many matching lines. Default 200, at most 5000.", 1, maxGrepResults),
		},
		runGrep)
}

func runGrep(ctx context.Context, c *call, p grepParams) Result {
	root, err := c.absOr(p.Path)
	if err != nil {
		return fail("path: %v", err)
	}
	limit := int(p.MaxResults)
	if limit == 0 {
		limit = defaultGrepResults
	}
	m, err := grepMatcher(p, limit)
	if err != nil {
		return fail("%v", err)
	}
	filter, err := grepFilter(p.Glob)
	if err != nil {
		return fail("%v", err)
	}
	fi, err := os.Stat(root)
	if err != nil {
		return fail("%s", errText("search", root, err))
	}
	s := &grepSearch{m: m, limit: limit}
	if !fi.IsDir() {
		if !fi.Mode().IsRegular() {
			return fail("%s is not a regular file or a directory", root)
		}
		hits, binary, err := m.searchFile(unix.AT_FDCWD, root, &scratch{}, true)
		switch {
		case err != nil:
			return fail("%s", errText("search", root, err))
		case binary:
			return ok("%s is a binary file; grep does not search binary files (try bash: grep -c PATTERN %s)", root, shellQuote(root))
		case hits != nil:
			hits.path = root
			s.found = append(s.found, hits)
			s.total.Store(int64(hits.matches))
		}
	} else {
		s.tree(ctx, root, filter)
	}
	if ctx.Err() != nil {
		return fail("cancelled")
	}
	notes := s.notes()
	if len(s.found) == 0 {
		msg := fmt.Sprintf("No matches for %s in %s", p.Pattern, root)
		if len(notes) > 0 {
			msg += " (" + strings.Join(notes, "; ") + ")"
		}
		return ok("%s", msg)
	}
	return ok("%s", render(s.found, m.context, limit, s.total.Load(), notes))
}

// grepMatcher compiles the pattern of p into a matcher that finds up to
// limit matching lines and one more (which tells the answer that there are
// more).
func grepMatcher(p grepParams, limit int) (*matcher, error) {
	expr := p.Pattern
	if p.IgnoreCase {
		expr = "(?i)" + expr
	}
	line, err := regexp.Compile(expr)
	if err != nil {
		return nil, fmt.Errorf("invalid regular expression: %v. grep uses Go's RE2 syntax (no backreferences or lookaround); "+
			"escape ( ) [ ] { } . * + ? | \\ with a backslash to match them literally", err)
	}
	window := regexp.MustCompile("(?m)" + expr) // compiles whenever expr does
	m := &matcher{window: window, line: line, context: int(p.ContextLines), maxMatches: limit + 1}
	if lit, fold, found := requiredLiteral(expr); found {
		m.lit, m.fold = []byte(lit), fold
		m.foldRisky = fold && strings.ContainsAny(lit, "ks")
	}
	return m, nil
}

// grepFilter is the file filter of a glob (nil for none): a glob with a /
// matches the path relative to the root searched, any other the file's
// name.
func grepFilter(glob string) (func(rel, name string) bool, error) {
	if glob == "" {
		return nil, nil
	}
	g, err := compileGlob(glob)
	if err != nil {
		return nil, fmt.Errorf("invalid glob %v", err)
	}
	if strings.Contains(glob, "/") {
		return func(rel, _ string) bool { return g.match(rel) }, nil
	}
	return func(_, name string) bool { return g.match(name) }, nil
}

// grepSearch gathers one search's hits and what it skipped.
type grepSearch struct {
	m     *matcher
	limit int

	mu         sync.Mutex
	found      []*fileHits
	total      atomic.Int64
	binaries   atomic.Int64
	unreadable atomic.Int64
}

// tree searches every regular file below root that filter (if any) lets
// through, in parallel, until it has more than limit matching lines.
func (s *grepSearch) tree(ctx context.Context, root string, filter func(rel, name string) bool) {
	scratches := make([]scratch, walkWorkers())
	var w *treeWalk
	w = &treeWalk{
		workers: len(scratches),
		enter:   func(_, name string) bool { return name != ".git" },
		visit: func(worker int, e *entry) {
			if e.typ != 0 || (filter != nil && !filter(e.rel, e.name)) {
				return // not a regular file, or filtered out
			}
			hits, binary, err := s.m.searchFile(e.dirfd, e.name, &scratches[worker], false)
			switch {
			case err != nil:
				s.unreadable.Add(1)
			case binary:
				s.binaries.Add(1)
			case hits != nil:
				hits.path = e.path()
				s.mu.Lock()
				s.found = append(s.found, hits)
				s.mu.Unlock()
				if s.total.Add(int64(hits.matches)) > int64(s.limit) {
					w.stop() // enough: the answer says there are more
				}
			}
		},
	}
	w.run(ctx, root)
	s.unreadable.Add(w.unreadable.Load())
}

// notes says what the search skipped.
func (s *grepSearch) notes() []string {
	var notes []string
	if n := s.binaries.Load(); n > 0 {
		notes = append(notes, fmt.Sprintf("skipped %s", plural(int(n), "binary file", "binary files")))
	}
	if n := s.unreadable.Load(); n > 0 {
		notes = append(notes, fmt.Sprintf("%s could not be read", plural(int(n), "file or directory", "files or directories")))
	}
	return notes
}

// render lists the hits in path order, at most limit matching lines.
func render(found []*fileHits, context, limit int, total int64, notes []string) string {
	sort.Slice(found, func(i, j int) bool { return found[i].path < found[j].path })
	var b strings.Builder
	shown, files := 0, 0
	capped := false
outer:
	for _, f := range found {
		if context > 0 && files > 0 {
			b.WriteString("--\n")
		}
		files++
		for _, l := range f.lines {
			switch {
			case l.sep:
				b.WriteString("--\n")
				continue
			case l.match && shown == limit:
				break outer
			case l.match:
				shown++
				fmt.Fprintf(&b, "%s:%d:%s\n", f.path, l.n, l.text)
			default:
				fmt.Fprintf(&b, "%s-%d-%s\n", f.path, l.n, l.text)
			}
			if b.Len() > maxGrepOutput {
				capped = true
				break outer
			}
		}
	}
	out := strings.TrimSuffix(strings.TrimSuffix(b.String(), "--\n"), "\n")
	switch {
	case capped:
		notes = append([]string{fmt.Sprintf("the answer reached its %d-byte cap after %s; narrow the pattern, path or glob",
			maxGrepOutput, plural(shown, "matching line", "matching lines"))}, notes...)
	case total > int64(shown):
		notes = append([]string{fmt.Sprintf("showing the first %s in path order of the ones found; there are more — "+
			"narrow the pattern, path or glob, or raise maxResults", plural(shown, "matching line", "matching lines"))}, notes...)
	default:
		notes = append([]string{fmt.Sprintf("%s in %s", plural(shown, "matching line", "matching lines"), plural(files, "file", "files"))}, notes...)
	}
	return out + "\n[" + strings.Join(notes, "; ") + "]"
}
