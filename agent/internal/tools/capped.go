package tools

import (
	"bytes"
	"fmt"
)

// headTail keeps the first and the last half of a stream of at most limit
// bytes in memory however long the stream runs: a command's output that
// goes over the limit is cut from the middle, where it is usually least
// useful (the command line's echo and the first error are at the head, the
// summary and the last error at the tail).
type headTail struct {
	half  int
	head  []byte
	tail  []byte // circular, len ≤ half
	next  int    // where the next tail byte goes once tail is full
	total int64
	lines int64 // newlines seen in total
}

func newHeadTail(limit int) *headTail {
	return &headTail{half: limit / 2}
}

func (h *headTail) Write(p []byte) (int, error) {
	n0 := len(p)
	h.total += int64(len(p))
	h.lines += int64(bytes.Count(p, []byte{'\n'}))
	if room := h.half - len(h.head); room > 0 {
		h.head = append(h.head, p[:min(room, len(p))]...)
	}
	// Every byte also passes through the tail ring: if the stream ends
	// below the limit the ring holds what follows the head.
	if len(p) >= h.half {
		h.tail = append(h.tail[:0], p[len(p)-h.half:]...)
		h.next = 0
		return n0, nil
	}
	for len(p) > 0 {
		if len(h.tail) < h.half {
			n := min(h.half-len(h.tail), len(p))
			h.tail = append(h.tail, p[:n]...)
			p = p[n:]
			continue
		}
		n := copy(h.tail[h.next:], p)
		h.next = (h.next + n) % h.half
		p = p[n:]
	}
	return n0, nil
}

// lastN is the last n bytes kept in the tail ring, n ≤ len(tail).
func (h *headTail) lastN(n int) []byte {
	ordered := append(append([]byte(nil), h.tail[h.next:]...), h.tail[:h.next]...)
	return ordered[len(ordered)-n:]
}

// String is the whole stream if it fitted, else its head and tail cut at
// line boundaries with a note saying how much was left out.
func (h *headTail) String() string {
	if h.total <= int64(2*h.half) {
		return string(h.head) + string(h.lastN(int(h.total)-len(h.head)))
	}
	head, tail := h.head, h.lastN(len(h.tail))
	// Cut at line boundaries when one is near, so no line is shown half.
	if i := bytes.LastIndexByte(head, '\n'); i >= len(head)*3/4 {
		head = head[:i+1]
	}
	if i := bytes.IndexByte(tail, '\n'); i >= 0 && i < len(tail)/4 {
		tail = tail[i+1:]
	}
	omitted := h.total - int64(len(head)) - int64(len(tail))
	omittedLines := h.lines - int64(bytes.Count(head, []byte{'\n'})) - int64(bytes.Count(tail, []byte{'\n'}))
	sep := ""
	if len(head) > 0 && head[len(head)-1] != '\n' {
		sep = "\n"
	}
	return fmt.Sprintf("%s%s[... %d bytes (%s) omitted from the middle of the output; total %d bytes. "+
		"Redirect to a file and read it, or filter with grep/head/tail, to see the rest ...]\n%s",
		head, sep, omitted, plural(int(omittedLines), "line", "lines"), h.total, tail)
}
