package tools

import (
	"fmt"
	"io/fs"
	"regexp"
	"strconv"
	"strings"
)

// filePatch is the part of a unified diff about one file.
type filePatch struct {
	oldPath, newPath string // as the patch names them; "" for /dev/null
	hunks            []*hunk
	newMode          fs.FileMode // from "new file mode" or "new mode"; 0: keep
	create, remove   bool
	git              bool // has a "diff --git" line: paths carry a/ and b/
	hasHeader        bool // has its ---/+++ lines
	renameFrom       string
	renameTo         string
}

// name is how messages call the file.
func (f *filePatch) name() string {
	if f.newPath != "" {
		return f.newPath
	}
	return f.oldPath
}

type hunk struct {
	header     string // the @@ line, for messages
	positioned bool   // the header has line numbers
	oldStart   int
	oldCount   int
	newCount   int
	lines      []hunkLine
	oldNoEOL   bool // "\ No newline at end of file" after the old side's last line
	newNoEOL   bool
}

type hunkLine struct {
	op   byte // ' ', '-' or '+'
	text string
}

// old and new are the hunk's two sides.
func (h *hunk) old() []string { return h.side('+') }
func (h *hunk) new() []string { return h.side('-') }

func (h *hunk) side(skip byte) []string {
	var out []string
	for _, l := range h.lines {
		if l.op != skip {
			out = append(out, l.text)
		}
	}
	return out
}

var hunkHeader = regexp.MustCompile(`^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@`)

// patchError is a patch the model got wrong; its message says where.
type patchError struct{ msg string }

func (e *patchError) Error() string { return e.msg }

func patchErr(format string, args ...any) error {
	return &patchError{msg: fmt.Sprintf(format, args...)}
}

// parsePatch reads a unified diff (plain or git's) of one or more files.
// Text before, between and after the file diffs (a commit message, index
// lines) is skipped; inside a hunk every line must be context, removal,
// addition or a "\ No newline" marker. The hunk line counts are not
// trusted: a hunk runs until the next hunk or file header, so a miscounted
// header still applies.
func parsePatch(text string) ([]*filePatch, error) {
	if strings.Contains(text, "*** Begin Patch") {
		return nil, patchErr("this looks like the \"*** Begin Patch\" format; apply_patch takes a unified diff " +
			"(\"--- a/path\", \"+++ b/path\", then \"@@ -start,count +start,count @@\" hunks of ' ', '-' and '+' lines)")
	}
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSuffix(l, "\r")
	}
	var out []*filePatch
	var cur *filePatch
	for i := 0; i < len(lines); {
		l := lines[i]
		switch {
		case strings.HasPrefix(l, "diff --git "):
			cur = &filePatch{git: true}
			out = append(out, cur)
			cur.oldPath, cur.newPath = splitGitPaths(l[len("diff --git "):])
			next, err := parseExtended(cur, lines, i+1)
			if err != nil {
				return nil, err
			}
			i = next
		case isFileHeader(lines, i):
			if cur == nil || !cur.git || cur.hasHeader || len(cur.hunks) > 0 {
				cur = &filePatch{}
				out = append(out, cur)
			}
			cur.oldPath, cur.newPath = headerPath(l[4:]), headerPath(lines[i+1][4:])
			cur.hasHeader = true
			i += 2
		case strings.HasPrefix(l, "@@"):
			if cur == nil {
				return nil, patchErr("line %d of the patch: a hunk (%s) before any file header; start each file with \"--- a/path\" and \"+++ b/path\"", i+1, l)
			}
			h, next, err := parseHunk(lines, i, cur, len(cur.hunks)+1)
			if err != nil {
				return nil, err
			}
			cur.hunks = append(cur.hunks, h)
			i = next
		default:
			i++
		}
	}
	if len(out) == 0 {
		return nil, patchErr("the patch has no file diffs: give a unified diff with \"--- a/path\" and \"+++ b/path\" headers followed by @@ hunks")
	}
	for _, f := range out {
		if err := f.normalise(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// isFileHeader reports whether lines[i] starts a "--- old" / "+++ new" pair.
func isFileHeader(lines []string, i int) bool {
	return strings.HasPrefix(lines[i], "--- ") && i+1 < len(lines) && strings.HasPrefix(lines[i+1], "+++ ")
}

// parseExtended reads git's extended header lines after "diff --git".
func parseExtended(f *filePatch, lines []string, i int) (int, error) {
	for ; i < len(lines); i++ {
		l := lines[i]
		switch {
		case strings.HasPrefix(l, "new file mode "):
			f.create = true
			f.newMode = parseMode(l[len("new file mode "):])
		case strings.HasPrefix(l, "deleted file mode "):
			f.remove = true
		case strings.HasPrefix(l, "new mode "):
			f.newMode = parseMode(l[len("new mode "):])
		case strings.HasPrefix(l, "rename from "):
			f.renameFrom = unquote(l[len("rename from "):])
		case strings.HasPrefix(l, "rename to "):
			f.renameTo = unquote(l[len("rename to "):])
		case strings.HasPrefix(l, "copy from "), strings.HasPrefix(l, "copy to "):
			return 0, patchErr("line %d of the patch: copies (%q) are not supported; add the new file as a creation (--- /dev/null)", i+1, l)
		case strings.HasPrefix(l, "Binary files "), strings.HasPrefix(l, "GIT binary patch"):
			return 0, patchErr("line %d of the patch: binary patches are not supported; write binary files with bash", i+1)
		case strings.HasPrefix(l, "old mode "), strings.HasPrefix(l, "index "),
			strings.HasPrefix(l, "similarity index "), strings.HasPrefix(l, "dissimilarity index "):
		default:
			return i, nil
		}
	}
	return i, nil
}

// parseHunk reads the hunk whose header is lines[i].
func parseHunk(lines []string, i int, f *filePatch, n int) (*hunk, int, error) {
	h := &hunk{header: lines[i]}
	if m := hunkHeader.FindStringSubmatch(lines[i]); m != nil {
		h.positioned = true
		h.oldStart, _ = strconv.Atoi(m[1])
		h.oldCount = 1
		if m[2] != "" {
			h.oldCount, _ = strconv.Atoi(m[2])
		}
		h.newCount = 1
		if m[4] != "" {
			h.newCount, _ = strconv.Atoi(m[4])
		}
	} else if strings.TrimSpace(strings.Trim(lines[i], "@")) != "" && !strings.HasPrefix(lines[i], "@@ ") {
		return nil, 0, patchErr("line %d of the patch: %q is not a hunk header; write \"@@ -start,count +start,count @@\"", i+1, lines[i])
	}
	i++
	for ; i < len(lines); i++ {
		l := lines[i]
		if l == "" {
			h.lines = append(h.lines, hunkLine{op: ' '}) // an empty context line whose space was stripped
			continue
		}
		switch l[0] {
		case ' ', '+':
			h.lines = append(h.lines, hunkLine{op: l[0], text: l[1:]})
			continue
		case '-':
			if isFileHeader(lines, i) && i+2 < len(lines) && (strings.HasPrefix(lines[i+2], "@@") || lines[i+2] == "") {
				break // the next file's header
			}
			h.lines = append(h.lines, hunkLine{op: '-', text: l[1:]})
			continue
		case '\\':
			h.markNoEOL()
			continue
		}
		if !endsHunk(l) {
			return nil, 0, patchErr("line %d of the patch, in hunk %d of %s (%s): %q is not a hunk line. Every line of a hunk "+
				"starts with ' ' (context, a space even for an empty line), '-' (removed) or '+' (added)",
				i+1, n, f.name(), h.header, l)
		}
		break
	}
	h.trimTrailingBlank()
	if len(h.lines) == 0 {
		return nil, 0, patchErr("hunk %d of %s (%s) is empty", n, f.name(), h.header)
	}
	return h, i, nil
}

// endsHunk reports whether a line that is no hunk line may follow a hunk:
// the start of the next hunk or file, or the chatter diffs carry.
func endsHunk(l string) bool {
	for _, p := range []string{"@@", "diff ", "--- ", "+++ ", "index ", "Index: ", "===", "Only in ", "new file mode ",
		"deleted file mode ", "old mode ", "new mode ", "similarity index ", "rename ", "```"} {
		if strings.HasPrefix(l, p) {
			return true
		}
	}
	return false
}

func (h *hunk) markNoEOL() {
	if len(h.lines) == 0 {
		return
	}
	switch h.lines[len(h.lines)-1].op {
	case '-':
		h.oldNoEOL = true
	case '+':
		h.newNoEOL = true
	default:
		h.oldNoEOL, h.newNoEOL = true, true
	}
}

// trimTrailingBlank drops empty context lines at the end of a hunk that its
// header does not count (blank lines between file diffs), or all of them
// when the header has no counts.
func (h *hunk) trimTrailingBlank() {
	for len(h.lines) > 0 {
		last := h.lines[len(h.lines)-1]
		if last.op != ' ' || last.text != "" {
			return
		}
		if h.positioned && len(h.old()) <= h.oldCount && len(h.new()) <= h.newCount {
			return
		}
		h.lines = h.lines[:len(h.lines)-1]
	}
}

// normalise turns the header paths into the paths to change: /dev/null
// marks creations and deletions, git's a/ and b/ prefixes go.
func (f *filePatch) normalise() error {
	if f.oldPath == "/dev/null" {
		f.oldPath, f.create = "", true
	}
	if f.newPath == "/dev/null" {
		f.newPath, f.remove = "", true
	}
	if f.create && f.remove {
		return patchErr("the diff of %s both creates and deletes it", f.name())
	}
	strip := f.git || ((f.oldPath == "" || strings.HasPrefix(f.oldPath, "a/")) && (f.newPath == "" || strings.HasPrefix(f.newPath, "b/")))
	if strip {
		f.oldPath = strings.TrimPrefix(f.oldPath, "a/")
		f.newPath = strings.TrimPrefix(f.newPath, "b/")
	}
	if f.renameFrom != "" || f.renameTo != "" {
		f.oldPath, f.newPath = f.renameFrom, f.renameTo
		if f.oldPath == "" || f.newPath == "" {
			return patchErr("the diff of %s has only one of \"rename from\" and \"rename to\"", f.name())
		}
	}
	switch {
	case f.create:
		f.oldPath = ""
	case f.remove:
		f.newPath = ""
	}
	if f.oldPath == "" && f.newPath == "" {
		return patchErr("a file diff names no file: its --- and +++ lines are missing or both /dev/null")
	}
	if !f.create && !f.remove && f.oldPath == "" {
		f.oldPath = f.newPath
	}
	if !f.create && !f.remove && f.newPath == "" {
		f.newPath = f.oldPath
	}
	return nil
}

// headerPath is the path of a ---/+++ line: without the timestamp diff(1)
// appends after a tab, unquoted when git quoted it.
func headerPath(s string) string {
	if i := strings.IndexByte(s, '\t'); i >= 0 {
		s = s[:i]
	}
	return unquote(strings.TrimRight(s, " "))
}

func unquote(s string) string {
	if strings.HasPrefix(s, `"`) {
		if u, err := strconv.Unquote(s); err == nil {
			return u
		}
	}
	return s
}

// splitGitPaths splits "a/x b/x" from a diff --git line; the ---/+++ lines,
// when present, replace the result. With spaces in names it guesses the
// split where both halves name the same file.
func splitGitPaths(s string) (string, string) {
	if strings.HasPrefix(s, `"`) {
		if end := strings.Index(s[1:], `" `); end >= 0 {
			return unquote(s[:end+2]), unquote(s[end+3:])
		}
	}
	for i := 0; i < len(s); i++ {
		if s[i] == ' ' && strings.HasPrefix(s[i+1:], "b/") && strings.TrimPrefix(s[:i], "a/") == s[i+3:] {
			return s[:i], s[i+1:]
		}
	}
	if i := strings.Index(s, " b/"); i >= 0 {
		return s[:i], s[i+1:]
	}
	return s, s
}

func parseMode(s string) fs.FileMode {
	m, err := strconv.ParseUint(strings.TrimSpace(s), 8, 32)
	if err != nil {
		return 0
	}
	return fs.FileMode(m) & fs.ModePerm
}
