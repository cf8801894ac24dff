package tools

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

type patchParams struct {
	Patch string `json:"patch"`
}

func applyPatchTool() *tool {
	return define("apply_patch",
		"Apply a unified diff (as made by `diff -u` or `git diff`) to one or more files, atomically: either every "+
			"hunk of every file applies and all files are written, or nothing changes and the answer names the "+
			"hunk that failed and why. Each file starts with `--- a/path` and `+++ b/path` lines (paths relative to "+
			"the call's directory, by default the user's home; the a/ and b/ prefixes are optional) followed by hunks: "+
			"`@@ -oldStart,oldCount +newStart,newCount @@`, then lines starting with ' ' (context, unchanged), '-' "+
			"(removed) or '+' (added). Give 2-3 context lines around each change and copy them exactly. Line "+
			"numbers are a hint: a hunk is found near them when the file moved, and the counts need not be exact. "+
			"`--- /dev/null` creates a file, `+++ /dev/null` deletes one (its hunk removes every line); git's "+
			"`rename from`/`rename to` and `new mode` lines work too. Files keep their mode, owner and line endings.",
		[]param{
			str("patch", "The unified diff text.").req(),
		},
		runApplyPatch)
}

func runApplyPatch(ctx context.Context, c *call, p patchParams) Result {
	patches, err := parsePatch(p.Patch)
	if err != nil {
		return fail("%v. No file was changed.", err)
	}
	fsys := newOverlay(c)
	var summary, notes []string
	for _, fp := range patches {
		line, fileNotes, err := fsys.apply(fp)
		if err != nil {
			return fail("%v. No file was changed.", err)
		}
		summary = append(summary, line)
		notes = append(notes, fileNotes...)
	}
	if ctx.Err() != nil {
		return fail("cancelled. No file was changed.")
	}
	if err := fsys.commit(); err != nil {
		return fail("%v. No file was changed.", err)
	}
	out := fmt.Sprintf("Applied the patch to %s:\n%s", plural(len(summary), "file", "files"), strings.Join(summary, "\n"))
	if len(notes) > 0 {
		out += "\n" + strings.Join(notes, "\n")
	}
	return ok("%s", out)
}

// apply applies one file's diff to the overlay; line summarises it.
func (o *overlay) apply(fp *filePatch) (line string, notes []string, err error) {
	switch {
	case fp.create:
		return o.applyCreate(fp)
	case fp.remove:
		return o.applyRemove(fp)
	}
	return o.applyChange(fp)
}

// applyCreate applies the diff of a file it creates.
func (o *overlay) applyCreate(fp *filePatch) (line string, notes []string, err error) {
	dst, f, err := o.resolveLoad(fp.newPath)
	if err != nil {
		return "", nil, err
	}
	if f.exists {
		return "", nil, patchErr("the diff of %s creates it, but %s already exists; change it with a diff against its current content instead", fp.newPath, dst)
	}
	f.exists, f.lines, f.mode = true, nil, newFileMode
	f.uid, f.gid = o.c.owner()
	if fp.newMode != 0 {
		f.mode = fp.newMode
	}
	if notes, err = applyHunks(f, fp); err != nil {
		return "", nil, err
	}
	f.changed = true
	return "A " + dst, notes, nil
}

// applyRemove applies the diff of a file it deletes.
func (o *overlay) applyRemove(fp *filePatch) (line string, notes []string, err error) {
	src, f, err := o.resolveLoad(fp.oldPath)
	if err != nil {
		return "", nil, err
	}
	if !f.exists {
		return "", nil, patchErr("the diff of %s deletes it, but %s does not exist", fp.oldPath, src)
	}
	if notes, err = applyHunks(f, fp); err != nil {
		return "", nil, err
	}
	if len(f.lines) > 0 && len(fp.hunks) > 0 {
		return "", nil, patchErr("the diff of %s deletes it, but its hunks leave %s of it; a deletion's hunk removes every line",
			fp.oldPath, plural(len(f.lines), "line", "lines"))
	}
	f.exists, f.lines, f.changed = false, nil, true
	return "D " + src, notes, nil
}

// applyChange applies the diff of a file it changes, and perhaps renames.
func (o *overlay) applyChange(fp *filePatch) (line string, notes []string, err error) {
	src, err := o.resolve(fp.oldPath)
	if err != nil {
		return "", nil, err
	}
	dst, err := o.resolve(fp.newPath)
	if err != nil {
		return "", nil, err
	}
	f, err := o.load(src)
	if err != nil {
		return "", nil, err
	}
	if !f.exists {
		return "", nil, patchErr("the diff of %s changes %s, which does not exist; to create it use \"--- /dev/null\"", fp.oldPath, src)
	}
	if notes, err = applyHunks(f, fp); err != nil {
		return "", nil, err
	}
	if fp.newMode != 0 {
		f.mode = f.mode&^fs.ModePerm | fp.newMode
	}
	f.changed = true
	hunks := plural(len(fp.hunks), "hunk", "hunks")
	if src == dst {
		return fmt.Sprintf("M %s (%s)", src, hunks), notes, nil
	}
	to, err := o.load(dst)
	if err != nil {
		return "", nil, err
	}
	if to.exists {
		return "", nil, patchErr("the diff of %s renames it to %s, which already exists", fp.oldPath, dst)
	}
	to.exists, to.lines, to.mode, to.uid, to.gid, to.changed = true, f.lines, f.mode, f.uid, f.gid, true
	to.xattrsFrom = f.xattrsFrom
	f.exists, f.lines = false, nil
	return fmt.Sprintf("R %s -> %s (%s)", src, dst, hunks), notes, nil
}

// resolveLoad resolves a path of the diff and loads the file there.
func (o *overlay) resolveLoad(p string) (string, *ofile, error) {
	path, err := o.resolve(p)
	if err != nil {
		return "", nil, err
	}
	f, err := o.load(path)
	return path, f, err
}

// applyHunks applies fp's hunks to f in order. Each hunk is looked for at
// its stated line (shifted by how far earlier hunks moved) and then ever
// further away, never overlapping the previous hunk; lines must match
// exactly, or failing that apart from trailing whitespace.
func applyHunks(f *ofile, fp *filePatch) ([]string, error) {
	var notes []string
	eol := f.eol()
	shift, minPos := 0, 0
	for i, h := range fp.hunks {
		old, hint := h.old(), minPos
		if h.positioned {
			hint = h.oldStart - 1 + shift
			if len(old) == 0 {
				hint = h.oldStart + shift // "-5,0" inserts after line 5
			}
		}
		at, loose := find(f.lines, old, hint, minPos)
		if at < 0 {
			return nil, hunkMismatch(f, fp, h, i+1, old, max(hint, minPos))
		}
		atEOF := at+len(old) == len(f.lines)
		repl := make([]pline, 0, len(h.lines))
		k := at
		for _, l := range h.lines {
			switch l.op {
			case ' ':
				repl = append(repl, f.lines[k])
				k++
			case '-':
				k++
			case '+':
				repl = append(repl, pline{text: l.text, eol: eol})
			}
		}
		if atEOF && len(repl) > 0 {
			last := &repl[len(repl)-1]
			switch {
			case h.newNoEOL:
				last.eol = ""
			case last.eol == "":
				last.eol = eol
			}
		}
		f.lines = append(f.lines[:at:at], append(repl, f.lines[at+len(old):]...)...)
		if h.positioned && at != hint {
			notes = append(notes, fmt.Sprintf("hunk %d of %s applied at line %d, %+d from where its header put it", i+1, fp.name(), at+1, at-hint))
		}
		if loose {
			notes = append(notes, fmt.Sprintf("hunk %d of %s matched only when trailing whitespace is ignored", i+1, fp.name()))
		}
		if h.positioned {
			shift = at - (h.oldStart - 1) + len(repl) - len(old)
			if len(old) == 0 {
				shift = at - h.oldStart + len(repl)
			}
		}
		minPos = at + len(repl)
	}
	// Only the last line may lack a line ending: a hunk that added lines
	// after a last line without one gives it the file's.
	for i := 0; i+1 < len(f.lines); i++ {
		if f.lines[i].eol == "" {
			f.lines[i].eol = eol
		}
	}
	return notes, nil
}

// find returns where old occurs in lines at or after minPos, nearest to
// hint; loose is set when it matched only ignoring trailing whitespace.
func find(lines []pline, old []string, hint, minPos int) (at int, loose bool) {
	last := len(lines) - len(old)
	if last < minPos {
		return -1, false
	}
	hint = min(max(hint, minPos), last)
	if len(old) == 0 {
		return hint, false
	}
	for pass, eq := range []func(a, b string) bool{
		func(a, b string) bool { return a == b },
		func(a, b string) bool { return strings.TrimRight(a, " \t") == strings.TrimRight(b, " \t") },
	} {
		for d := 0; hint-d >= minPos || hint+d <= last; d++ {
			for _, p := range []int{hint - d, hint + d} {
				if p < minPos || p > last || (d == 0 && p != hint) {
					continue
				}
				if matchAt(lines, old, p, eq) {
					return p, pass == 1
				}
			}
		}
	}
	return -1, false
}

func matchAt(lines []pline, old []string, p int, eq func(a, b string) bool) bool {
	for k, o := range old {
		if !eq(strings.TrimSuffix(lines[p+k].text, "\r"), strings.TrimSuffix(o, "\r")) {
			return false
		}
	}
	return true
}

// hunkMismatch explains where a hunk failed: the first line that differs
// at the place its header names.
func hunkMismatch(f *ofile, fp *filePatch, h *hunk, n int, old []string, at int) error {
	msg := fmt.Sprintf("hunk %d of %s (%s) does not apply: no place in %s matches its %s", n, fp.name(), h.header, f.path,
		plural(len(old), "context and removed line", "context and removed lines"))
	if len(old) > len(f.lines) {
		return patchErr("%s (the file has only %s)", msg, plural(len(f.lines), "line", "lines"))
	}
	at = min(at, len(f.lines)-len(old))
	for k, o := range old {
		got := strings.TrimSuffix(f.lines[at+k].text, "\r")
		if got != strings.TrimSuffix(o, "\r") {
			return patchErr("%s. At line %d, where the hunk's header puts it, the hunk expects %q but the file has %q; "+
				"read the file again and copy the context lines exactly", msg, at+k+1, o, got)
		}
	}
	return patchErr("%s; it would overlap the previous hunk — merge the two hunks", msg)
}

// overlay holds the files a patch changes, in memory, until every hunk has
// applied.
type overlay struct {
	c     *call
	files map[string]*ofile
	order []*ofile
}

type ofile struct {
	path     string // absolute, symlinks resolved
	exists   bool
	lines    []pline
	mode     fs.FileMode
	uid, gid int
	existed  bool // on disk before the patch
	changed  bool
	// xattrsFrom is the file whose extended attributes the new content
	// keeps: itself, or the source of a rename.
	xattrsFrom string
}

// pline is one line and its ending ("\n", "\r\n", or "" for a last line
// without one).
type pline struct{ text, eol string }

func newOverlay(c *call) *overlay { return &overlay{c: c, files: map[string]*ofile{}} }

func (o *overlay) resolve(p string) (string, error) {
	abs, err := o.c.abs(p)
	if err != nil {
		return "", patchErr("path %q: %v", p, err)
	}
	return resolveLink(abs), nil
}

// load returns the overlay's view of path, reading it the first time.
func (o *overlay) load(path string) (*ofile, error) {
	if f, ok := o.files[path]; ok {
		return f, nil
	}
	f := &ofile{path: path}
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, patchErr("%s", errText("read", path, err))
	case fi.IsDir():
		return nil, patchErr("%s is a directory", path)
	case !fi.Mode().IsRegular():
		return nil, patchErr("%s is not a regular file (%s)", path, fi.Mode().Type())
	case fi.Size() > maxEditBytes:
		return nil, patchErr("%s is %s, more than apply_patch loads (%s)", path, humanSize(fi.Size()), humanSize(maxEditBytes))
	default:
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, patchErr("%s", errText("read", path, err))
		}
		if isBinary(data) {
			return nil, patchErr("%s is a binary file; apply_patch changes text files only", path)
		}
		f.exists, f.existed, f.xattrsFrom = true, true, path
		f.lines = splitLines(string(data))
		f.mode = keptMode(fi)
		f.uid, f.gid = ownerOf(fi)
	}
	o.files[path] = f
	o.order = append(o.order, f)
	return f, nil
}

func splitLines(s string) []pline {
	var out []pline
	for s != "" {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			out = append(out, pline{text: s})
			break
		}
		text, eol := s[:i], "\n"
		if strings.HasSuffix(text, "\r") {
			text, eol = text[:len(text)-1], "\r\n"
		}
		out = append(out, pline{text: text, eol: eol})
		s = s[i+1:]
	}
	return out
}

// eol is the line ending most of the file's lines use ("\n" when none).
func (f *ofile) eol() string {
	crlf, lf := 0, 0
	for _, l := range f.lines {
		switch l.eol {
		case "\r\n":
			crlf++
		case "\n":
			lf++
		}
	}
	if crlf > lf {
		return "\r\n"
	}
	return "\n"
}

func (f *ofile) content() []byte {
	var b strings.Builder
	for _, l := range f.lines {
		b.WriteString(l.text)
		b.WriteString(l.eol)
	}
	return []byte(b.String())
}
