package server

import (
	"encoding/binary"
	"net/http"
	"strings"
)

// A Connect stream's last message (end-of-stream, flag 2) is followed at
// once by the end of the agent's answer. The envd proxy flushes after each
// read from the agent, so that message would leave the node in one write
// and a chunked body's last chunk in another, a moment later: two wake-ups,
// reads and writes at the gateway and the client for one event. Written
// without a flush, it leaves with the body's end in the server's own flush
// when the proxy returns. Nothing waits: the agent's stream ends with (or
// right after) that message, which the protocol says is the last.

// streamEndWriter is the envd proxy's ResponseWriter: it follows the
// Connect envelopes written through it (5-byte head: flags, big-endian
// length) and skips the flush when what was written ends with a whole
// end-of-stream message.
type streamEndWriter struct {
	http.ResponseWriter
	decided, connect bool
	head             [5]byte
	headN            int    // bytes of the current head seen; 5 inside a message
	left             uint32 // bytes of the current message still to come
	atEnd            bool   // the bytes so far end with a whole end-of-stream message
}

func (w *streamEndWriter) Write(p []byte) (int, error) {
	if !w.decided {
		w.decided = true
		w.connect = strings.HasPrefix(w.Header().Get("Content-Type"), "application/connect+")
	}
	if w.connect {
		w.follow(p)
	}
	return w.ResponseWriter.Write(p)
}

// follow advances the envelope state over p.
func (w *streamEndWriter) follow(p []byte) {
	for len(p) > 0 {
		w.atEnd = false
		if w.headN < len(w.head) {
			n := copy(w.head[w.headN:], p)
			w.headN += n
			p = p[n:]
			if w.headN < len(w.head) {
				return
			}
			w.left = binary.BigEndian.Uint32(w.head[1:])
		} else {
			n := min(uint32(len(p)), w.left)
			w.left -= n
			p = p[n:]
		}
		if w.left == 0 {
			w.headN = 0
			w.atEnd = w.head[0]&2 != 0
		}
	}
}

// Flush passes the proxy's per-read flush on, except after the stream's
// end-of-stream message (see above).
func (w *streamEndWriter) Flush() {
	if w.atEnd {
		return
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *streamEndWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
