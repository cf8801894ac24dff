package tools

import (
	"context"
	"fmt"
	"os"
	"strings"
)

// maxEditBytes bounds the file edit loads whole.
const maxEditBytes = 64 << 20

type editParams struct {
	Path       string `json:"path"`
	OldString  string `json:"oldString"`
	NewString  string `json:"newString"`
	ReplaceAll bool   `json:"replaceAll"`
}

func editTool() *tool {
	return define("edit",
		"Replace an exact piece of text in an existing file. oldString must match the file exactly, including "+
			"whitespace and indentation (copy it from read's output without the line-number prefix), and must "+
			"occur exactly once unless replaceAll is true; otherwise the edit fails and says where the text was "+
			"or was not found — add surrounding lines to oldString to make it unique. The file keeps its mode, "+
			"owner and line endings: in a file with Windows (\\r\\n) line endings you can write oldString and "+
			"newString with plain \\n. The answer shows the edited lines. To create a file use write; for many "+
			"changes in one go use apply_patch.",
		[]param{
			str("path", "The file to edit: absolute, or relative to the call's directory (by default the user's home).").req(),
			str("oldString", "The exact text to replace. Must not be empty.").req(),
			str("newString", "The text to put in its place; may be empty to delete oldString. Must differ from oldString.").reqMayBeEmpty(),
			boolean("replaceAll", "Replace every occurrence of oldString instead of requiring exactly one. Default false."),
		},
		runEdit)
}

func runEdit(ctx context.Context, c *call, p editParams) Result {
	path, err := c.abs(p.Path)
	if err != nil {
		return fail("path: %v", err)
	}
	if p.OldString == p.NewString {
		return fail("oldString and newString are the same: there is nothing to change")
	}
	target := resolveLink(path)
	fi, err := os.Stat(target)
	if os.IsNotExist(err) {
		return fail("%s does not exist; edit changes existing files (create one with write)", path)
	}
	if err != nil {
		return fail("%s", errText("edit", path, err))
	}
	if fi.IsDir() {
		return fail("%s is a directory, not a file", path)
	}
	if !fi.Mode().IsRegular() {
		return fail("%s is not a regular file (%s)", path, fi.Mode().Type())
	}
	if fi.Size() > maxEditBytes {
		return fail("%s is %s, more than edit loads (%s); change it with apply_patch or bash (sed)", path, humanSize(fi.Size()), humanSize(maxEditBytes))
	}
	data, err := os.ReadFile(target)
	if err != nil {
		return fail("%s", errText("edit", path, err))
	}
	if isBinary(data) {
		return fail("%s", binaryRefusal(path, int64(len(data)), data[:min(len(data), sniffLen)]))
	}
	content := string(data)
	crlf := usesCRLF(content)
	old, repl := p.OldString, p.NewString
	n := strings.Count(content, old)
	if n == 0 {
		// The model may have written the file's line endings the other way.
		if alt := withEndings(old, crlf); alt != old {
			if n = strings.Count(content, alt); n > 0 {
				old = alt
			}
		}
	}
	if n == 0 {
		return fail("%s", notFound(path, content, p.OldString))
	}
	if n > 1 && !p.ReplaceAll {
		return fail("oldString occurs %d times in %s (at lines %s); add surrounding lines to oldString so that it "+
			"matches exactly one place, or set replaceAll to replace them all", n, path, occurrenceLines(content, old, 10))
	}
	repl = withEndings(repl, crlf)
	first := strings.Index(content, old)
	var updated string
	if p.ReplaceAll {
		updated = strings.ReplaceAll(content, old, repl)
	} else {
		updated = content[:first] + repl + content[first+len(old):]
	}
	uid, gid := ownerOf(fi)
	if err := replace(target, []byte(updated), keptMode(fi), uid, gid, true); err != nil {
		return fail("%s", errText("edit", path, err))
	}
	startLine := 1 + strings.Count(content[:first], "\n")
	endLine := startLine + strings.Count(repl, "\n")
	what := "1 occurrence"
	if n > 1 {
		what = fmt.Sprintf("%d occurrences (the first is shown)", n)
	}
	return ok("Edited %s: replaced %s.\n%s", path, what, snippet(updated, startLine-3, endLine+3, 40))
}

// usesCRLF reports whether most of content's line endings are \r\n.
func usesCRLF(content string) bool {
	crlf := strings.Count(content, "\r\n")
	return crlf > 0 && crlf*2 >= strings.Count(content, "\n")
}

// withEndings rewrites s's line endings to \r\n (crlf) or \n.
func withEndings(s string, crlf bool) string {
	lf := strings.ReplaceAll(s, "\r\n", "\n")
	if !crlf {
		return lf
	}
	return strings.ReplaceAll(lf, "\n", "\r\n")
}

// occurrenceLines lists the line numbers where sub starts, at most limit.
func occurrenceLines(content, sub string, limit int) string {
	var nums []string
	line, pos := 1, 0
	for len(nums) < limit {
		i := strings.Index(content[pos:], sub)
		if i < 0 {
			break
		}
		line += strings.Count(content[pos:pos+i], "\n")
		nums = append(nums, fmt.Sprint(line))
		line += strings.Count(sub, "\n")
		pos += i + len(sub)
	}
	s := strings.Join(nums, ", ")
	if strings.Count(content, sub) > limit {
		s += ", …"
	}
	return s
}

// notFound explains a missing oldString and points at lines that match its
// first line apart from indentation or trailing spaces.
func notFound(path, content, old string) string {
	msg := fmt.Sprintf("oldString was not found in %s. It must match the file exactly, including whitespace, "+
		"indentation and line breaks; read the file again and copy the text", path)
	firstLine := ""
	for _, l := range strings.Split(strings.ReplaceAll(old, "\r\n", "\n"), "\n") {
		if strings.TrimSpace(l) != "" {
			firstLine = strings.TrimSpace(l)
			break
		}
	}
	if firstLine == "" {
		return msg + "."
	}
	var near []string
	for i, l := range strings.Split(content, "\n") {
		if strings.TrimSpace(l) == firstLine {
			near = append(near, fmt.Sprint(i+1))
			if len(near) == 5 {
				break
			}
		}
	}
	if len(near) == 0 {
		return msg + fmt.Sprintf(". Not even its first line (%q) occurs in the file.", firstLine)
	}
	return msg + fmt.Sprintf(". Its first line occurs (ignoring surrounding whitespace) at line %s: the text around it or its indentation differs.",
		strings.Join(near, ", "))
}

// snippet numbers content's lines from..to (1-based, clamped), at most max.
func snippet(content string, from, to, limit int) string {
	lines := strings.Split(content, "\n")
	if strings.HasSuffix(content, "\n") {
		lines = lines[:len(lines)-1]
	}
	from = max(from, 1)
	to = min(to, len(lines), from+limit-1)
	var b strings.Builder
	for i := from; i <= to; i++ {
		l := strings.TrimSuffix(lines[i-1], "\r")
		if len(l) > maxLineBytes {
			l = l[:maxLineBytes] + "…"
		}
		fmt.Fprintf(&b, "%6d\t%s\n", i, l)
	}
	return strings.TrimSuffix(b.String(), "\n")
}
