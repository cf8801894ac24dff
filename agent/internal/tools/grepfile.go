package tools

import (
	"bytes"
	"regexp"

	"golang.org/x/sys/unix"
)

const (
	// grepWindow is how much of a file is searched at once; a bigger file
	// is searched window by window, so its size does not matter.
	grepWindow = 1 << 20
	// maxGrepLineLen is the longest line a window grows to hold; a longer
	// one is searched in pieces.
	maxGrepLineLen = 16 << 20
)

// matcher is one compiled search, shared by the workers.
type matcher struct {
	// window finds candidates in a whole window ((?m): ^ and $ match at
	// line breaks); line confirms that a candidate's line matches alone, so
	// a match spanning lines is not reported and grep keeps line semantics.
	window, line *regexp.Regexp
	// lit, when set, is a literal every match contains (lower-case when
	// fold): a window without it is skipped at memchr speed, and when it is
	// long enough its occurrences, not the regexp, find the candidates.
	lit        []byte
	fold       bool
	foldRisky  bool // fold and lit has k or s, which (?i) also matches as K (U+212A) and ſ (U+017F)
	context    int
	maxMatches int
}

// scratch is one worker's reusable buffers.
type scratch struct {
	buf   []byte
	lower []byte
}

// outLine is one line of grep's answer: a match, a context line, or a
// "--" separator between groups that are not adjacent.
type outLine struct {
	n     int64
	text  []byte
	match bool
	sep   bool
}

// fileHits is what one file produced.
type fileHits struct {
	path    string
	lines   []outLine
	matches int
}

// fileSearch is the state of searching one file, window by window.
type fileSearch struct {
	m           *matcher
	sc          *scratch
	out         []outLine
	matches     int
	lastPrinted int64 // line number of the last line in out; 0: none
	afterLeft   int   // context lines still owed after the last match
	carry       []outLine
}

// searchFile searches the regular file name in the directory dirfd (or
// AT_FDCWD and a path). The file's path is left for the caller to fill in.
// binary is set when the file was skipped as binary.
func (m *matcher) searchFile(dirfd int, name string, sc *scratch, follow bool) (hits *fileHits, binary bool, err error) {
	flags := unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NONBLOCK
	if !follow {
		flags |= unix.O_NOFOLLOW
	}
	fd, err := openat(dirfd, name, flags)
	if err != nil {
		return nil, false, err
	}
	defer unix.Close(fd)
	s := &fileSearch{m: m, sc: sc}
	line := int64(1) // number of the first line in the next window
	kept := 0        // bytes of an unfinished line carried to the next read
	first, sniffLater, sampleLen := true, false, 0
	for {
		if kept == len(sc.buf) { // a line longer than the buffer, or no buffer yet
			grown := make([]byte, max(2*len(sc.buf), grepWindow))
			copy(grown, sc.buf[:kept])
			sc.buf = grown
		}
		n, rerr := readFull(fd, sc.buf[kept:])
		data := sc.buf[:kept+n]
		eof := rerr != nil || n == 0
		if rerr != nil && rerr != errEOF {
			return nil, false, rerr
		}
		if first {
			first = false
			sampleLen = min(len(data), sniffLen)
			sample := data[:sampleLen]
			if bytes.IndexByte(sample, 0) >= 0 {
				return nil, true, nil
			}
			// The finer test costs as much as the search of a small file:
			// for a file read whole, only a file with matches takes it.
			if eof {
				sniffLater = true
			} else if isBinary(sample) {
				return nil, true, nil
			}
		}
		win := data
		if !eof {
			cut := bytes.LastIndexByte(data, '\n')
			if cut < 0 && len(sc.buf) < maxGrepLineLen {
				kept = len(data) // grow and read on to the end of the line
				continue
			}
			if cut >= 0 { // else an endless line: search it in pieces
				win = data[:cut+1]
			}
		}
		s.window(win, line, eof)
		if s.matches >= m.maxMatches || eof {
			break
		}
		line += int64(bytes.Count(win, []byte{'\n'}))
		kept = copy(sc.buf, data[len(win):])
	}
	if s.matches == 0 {
		return nil, false, nil
	}
	if sniffLater && isBinary(sc.buf[:sampleLen]) { // read whole: the sample is still there
		return nil, true, nil
	}
	return &fileHits{lines: s.out, matches: s.matches}, false, nil
}

func openat(dirfd int, name string, flags int) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, name, flags, 0)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

type eofError struct{}

func (eofError) Error() string { return "EOF" }

var errEOF error = eofError{}

// readFull fills p from fd until it is full or the file ends (errEOF with
// what was read). A regular file never returns EAGAIN, so O_NONBLOCK (there
// only so a FIFO swapped in cannot hang the open) changes nothing here.
func readFull(fd int, p []byte) (int, error) {
	n := 0
	for n < len(p) {
		k, err := unix.Read(fd, p[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, err
		}
		if k == 0 {
			return n, errEOF
		}
		n += k
	}
	return n, nil
}

// window searches buf, whole lines starting at line number first (the last
// one may lack its newline when final).
func (s *fileSearch) window(buf []byte, first int64, final bool) {
	after := 0 // byte offset of line lastPrinted+1, when it is in this window
	if s.lastPrinted+1 != first {
		s.afterLeft = 0
	}
	next := s.candidates(buf)
	pos, lineNo := 0, first // lineNo is the number of the line at pos
	for pos < len(buf) && s.matches < s.m.maxMatches {
		at := next(pos)
		if at < 0 {
			break
		}
		if at == len(buf) && buf[len(buf)-1] == '\n' {
			break // an empty match after the last line break is no line
		}
		ls := bytes.LastIndexByte(buf[:at], '\n') + 1
		le := len(buf)
		if i := bytes.IndexByte(buf[at:], '\n'); i >= 0 {
			le = at + i
		}
		lineNo += int64(bytes.Count(buf[pos:ls], []byte{'\n'}))
		if s.m.line.Match(trimCR(buf[ls:le])) {
			s.flushAfter(buf, after, lineNo)
			s.before(buf, ls, lineNo, first)
			s.add(lineNo, buf[ls:le], true)
			s.matches++
			s.afterLeft = s.m.context
			after = le + 1
		}
		pos, lineNo = le+1, lineNo+1
	}
	if s.afterLeft > 0 { // context owed after this window's last match, or the previous one's
		s.flushAfter(buf, after, first+int64(bytes.Count(buf, []byte{'\n'}))+1)
	}
	if !final && s.m.context > 0 {
		s.keepTail(buf, first)
	}
}

// candidates returns the function that finds, from a position in buf, the
// next place a match may start (-1: none left).
func (s *fileSearch) candidates(buf []byte) func(pos int) int {
	m := s.m
	byRegexp := func(pos int) int {
		loc := m.window.FindIndex(buf[pos:])
		if loc == nil {
			return -1
		}
		return pos + loc[0]
	}
	if m.lit == nil {
		return byRegexp
	}
	hay := buf
	if m.fold {
		if m.foldRisky && (bytes.IndexByte(buf, 0xE2) >= 0 || bytes.IndexByte(buf, 0xC5) >= 0) {
			return byRegexp // the window may hold a K or ſ that (?i) matches
		}
		hay = lowerASCII(&s.sc.lower, buf)
	}
	if !bytes.Contains(hay, m.lit) {
		return func(int) int { return -1 }
	}
	if len(m.lit) < 3 {
		return byRegexp // a short literal is too common to drive the search
	}
	return func(pos int) int {
		i := bytes.Index(hay[pos:], m.lit)
		if i < 0 {
			return -1
		}
		// The line holding the literal is the candidate: the match may
		// start before the literal, so point at the line's start.
		return bytes.LastIndexByte(buf[:pos+i], '\n') + 1
	}
}

// lowerASCII lower-cases the ASCII letters of src into *dst (grown as
// needed), keeping every other byte, so offsets stay the same.
func lowerASCII(dst *[]byte, src []byte) []byte {
	if cap(*dst) < len(src) {
		*dst = make([]byte, len(src), max(len(src), grepWindow))
	}
	out := (*dst)[:len(src)]
	for i, c := range src {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		out[i] = c
	}
	return out
}

// flushAfter adds the context lines owed after the last match, up to (not
// including) line upto, reading them from buf at next.
func (s *fileSearch) flushAfter(buf []byte, next int, upto int64) {
	for s.afterLeft > 0 && s.lastPrinted+1 < upto && next < len(buf) {
		e := len(buf)
		if i := bytes.IndexByte(buf[next:], '\n'); i >= 0 {
			e = next + i
		}
		s.add(s.lastPrinted+1, buf[next:e], false)
		s.afterLeft--
		next = e + 1
	}
}

// before adds the context lines before the match at line n (starting at
// byte ls), from this window or the tail kept from the previous one.
func (s *fileSearch) before(buf []byte, ls int, n, first int64) {
	want := int64(s.m.context)
	if s.lastPrinted > 0 {
		want = min(want, n-s.lastPrinted-1)
	}
	if want <= 0 {
		return // no context asked for, or the lines before are printed already
	}
	var starts []int // line starts going backwards
	for off := ls; int64(len(starts)) < want && off > 0; {
		prev := bytes.LastIndexByte(buf[:off-1], '\n') + 1
		starts = append(starts, prev)
		off = prev
	}
	from := n - int64(len(starts)) // first context line taken from buf
	var fromCarry []outLine
	if short := want - int64(len(starts)); short > 0 {
		for _, l := range s.carry {
			if l.n >= from-short && l.n < from && l.n > s.lastPrinted {
				fromCarry = append(fromCarry, l)
			}
		}
	}
	firstShown := from
	if len(fromCarry) > 0 {
		firstShown = fromCarry[0].n
	}
	if s.lastPrinted > 0 && firstShown > s.lastPrinted+1 {
		s.out = append(s.out, outLine{sep: true})
	}
	for _, l := range fromCarry {
		s.out = append(s.out, l)
		s.lastPrinted = l.n
	}
	for i := len(starts) - 1; i >= 0; i-- {
		e := ls - 1
		if i > 0 {
			e = starts[i-1] - 1
		}
		s.add(n-int64(i)-1, buf[starts[i]:e], false)
	}
}

// keepTail copies the last context lines of a window for the next one's
// before-context.
func (s *fileSearch) keepTail(buf []byte, first int64) {
	s.carry = s.carry[:0]
	total := first + int64(bytes.Count(buf, []byte{'\n'})) // number of the next window's first line
	end := len(buf) - 1                                    // the final '\n'
	var tail []outLine
	for k := int64(1); k <= int64(s.m.context) && end >= 0; k++ {
		start := bytes.LastIndexByte(buf[:end], '\n') + 1
		tail = append(tail, outLine{n: total - k, text: clip(buf[start:end])})
		end = start - 1
	}
	for i := len(tail) - 1; i >= 0; i-- {
		s.carry = append(s.carry, tail[i])
	}
}

func (s *fileSearch) add(n int64, text []byte, match bool) {
	s.out = append(s.out, outLine{n: n, text: clip(text), match: match})
	s.lastPrinted = n
}

// maxGrepLine cuts long lines (minified code) in grep's answer.
const maxGrepLine = 500

// clip copies a line for the answer (buf is reused), cut at maxGrepLine.
func clip(text []byte) []byte {
	text = trimCR(text)
	if len(text) <= maxGrepLine {
		return append([]byte(nil), text...)
	}
	out := append([]byte(nil), text[:maxGrepLine]...)
	return append(out, []byte("… [line cut]")...)
}

func trimCR(b []byte) []byte {
	if len(b) > 0 && b[len(b)-1] == '\r' {
		return b[:len(b)-1]
	}
	return b
}
