package tools

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"unicode/utf8"
)

const (
	defaultReadLimit = 2000
	maxReadLimit     = 100_000
	// maxLineBytes cuts one very long line (minified code, a data dump).
	maxLineBytes = 2000
	// maxReadOutput bounds one answer; past it the answer says where to go on.
	maxReadOutput = 200_000
	// maxCountBytes bounds the scan that counts the lines after the window,
	// so reading the head of a huge log stays fast.
	maxCountBytes = 256 << 20
)

type readParams struct {
	Path   string `json:"path"`
	Offset int64  `json:"offset"`
	Limit  int64  `json:"limit"`
}

func readTool() *tool {
	return define("read",
		"Read a text file. Lines come numbered like `cat -n` (line number, a tab, the line) so you can cite and "+
			"edit them; the numbers are not part of the file. By default the first 2000 lines are shown; for longer "+
			"files the answer says how many lines there are and which offset to continue from. Lines longer than "+
			"2000 bytes are cut with a note. Line endings (\\r\\n) are not shown. Binary files are refused with a "+
			"message (use bash with file/xxd for them); for directories use ls.",
		[]param{
			str("path", "The file to read: absolute, or relative to the call's directory (by default the user's home). ~ is the home.").req(),
			integer("offset", "The 1-based number of the first line to show. Default 1.", 1, 1<<40),
			integer("limit", "How many lines to show at most. Default 2000.", 1, maxReadLimit),
		},
		runRead)
}

func runRead(ctx context.Context, c *call, p readParams) Result {
	path, err := c.abs(p.Path)
	if err != nil {
		return fail("path: %v", err)
	}
	offset, limit := max(p.Offset, 1), p.Limit
	if limit == 0 {
		limit = defaultReadLimit
	}
	fi, err := os.Stat(path)
	if err != nil {
		return fail("%s", errText("read", path, err))
	}
	if fi.IsDir() {
		return fail("%s is a directory, not a file; list it with the ls tool", path)
	}
	if !fi.Mode().IsRegular() {
		return fail("%s is not a regular file (%s); read only reads files", path, fi.Mode().Type())
	}
	// O_NONBLOCK: should the path turn into a FIFO meanwhile, the open must
	// not hang waiting for a writer.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return fail("%s", errText("read", path, err))
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	sample, _ := br.Peek(sniffLen)
	if len(sample) == 0 {
		return ok("(%s is empty)", path)
	}
	if isBinary(sample) {
		return fail("%s", binaryRefusal(path, fi.Size(), sample))
	}

	line, err := skipLines(ctx, br, offset)
	if err != nil {
		return fail("cancelled")
	}
	if _, err := br.Peek(1); err != nil {
		total := linesUpTo(f, line)
		return fail("offset %d is past the end of %s, which has %s; use an offset from 1 to %d",
			offset, path, plural(int(total), "line", "lines"), max(total, 1))
	}

	var b strings.Builder
	first, shown := line, int64(0)
	capped := false
	for shown < limit {
		text, more := readLine(br)
		if !more {
			break
		}
		fmt.Fprintf(&b, "%6d\t%s\n", line, text)
		line++
		shown++
		if b.Len() >= maxReadOutput {
			capped = true
			break
		}
	}
	out := strings.TrimSuffix(b.String(), "\n")
	if _, err := br.Peek(1); err != nil {
		return ok("%s", out) // the file ends here
	}
	rest, exact := countLines(br)
	total := fmt.Sprintf("%d", line-1+rest)
	if !exact {
		total = "more than " + total
	}
	why := ""
	if capped {
		why = fmt.Sprintf(" (the answer reached its %d-byte cap)", maxReadOutput)
	}
	return ok("%s\n[showing lines %d-%d of %s%s; continue with offset=%d]", out, first, line-1, total, why, line)
}

// skipLines reads br up to line offset (1-based) or its end and returns the
// number of the line it stopped at; an error means ctx was cancelled.
func skipLines(ctx context.Context, br *bufio.Reader, offset int64) (int64, error) {
	line := int64(1)
	for line < offset {
		_, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			continue // the same long line goes on
		}
		if err != nil {
			break
		}
		line++
		if line%4096 == 0 && ctx.Err() != nil {
			return line, ctx.Err()
		}
	}
	return line, nil
}

// linesUpTo is how many lines f has when its reading ended at the start of
// line: one more when its last line has no newline.
func linesUpTo(f *os.File, line int64) int64 {
	total := line - 1
	if n, _ := f.Seek(-1, io.SeekEnd); n >= 0 {
		last := make([]byte, 1)
		if _, err := f.Read(last); err == nil && last[0] != '\n' {
			total = line // the last line has no newline but counts
		}
	}
	return total
}

// readLine reads one line without its line ending, cut at maxLineBytes;
// more is false at the end of the file.
func readLine(br *bufio.Reader) (text string, more bool) {
	var buf []byte // the line's first bytes, enough to cut it
	total := 0
	var last2 [2]byte // the line's last two bytes: its ending
	for {
		chunk, err := br.ReadSlice('\n')
		total += len(chunk)
		if room := maxLineBytes + 2 - len(buf); room > 0 {
			buf = append(buf, chunk[:min(room, len(chunk))]...)
		}
		for _, b := range chunk[max(0, len(chunk)-2):] {
			last2[0], last2[1] = last2[1], b
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			break
		}
	}
	if total == 0 {
		return "", false
	}
	eol := 0
	if last2[1] == '\n' {
		eol = 1
		if total >= 2 && last2[0] == '\r' {
			eol = 2
		}
	}
	n := total - eol
	if n <= maxLineBytes {
		return string(buf[:n]), true
	}
	keep := maxLineBytes
	for keep > 0 && !utf8.RuneStart(buf[keep]) {
		keep-- // do not split a character
	}
	return fmt.Sprintf("%s… [line cut: %d more bytes]", buf[:keep], n-keep), true
}

// countLines counts the lines left in br, scanning at most maxCountBytes.
func countLines(br *bufio.Reader) (n int64, exact bool) {
	buf := make([]byte, 256<<10)
	scanned, last := int64(0), byte('\n')
	for scanned < maxCountBytes {
		k, err := br.Read(buf)
		if k > 0 {
			n += int64(bytes.Count(buf[:k], []byte{'\n'}))
			last = buf[k-1]
			scanned += int64(k)
		}
		if err != nil {
			if last != '\n' {
				n++
			}
			return n, true
		}
	}
	return n, false
}
