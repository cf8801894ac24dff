package process

import (
	"context"
	"net/http"
)

// A command's events often become ready together: a short command's
// output and its end, or a burst of output. connect-go flushes after every
// message, so each event would leave as its own HTTP/2 frame and cross the
// daemon and the gateway as its own wake-up, read and write. The stream
// handlers instead write every event that is ready and flush once when
// none is left; they never wait for one that is not, so no event is late.

// coalescer is the stream's ResponseWriter with flushes that can be held
// while a batch of ready events is written. Only the handler's goroutine
// writes and flushes a stream, so it needs no lock.
type coalescer struct {
	http.ResponseWriter
	held    bool
	pending bool
}

type coalescerKey struct{}

// coalesceFlushes lets the stream handlers under h batch their flushes.
func coalesceFlushes(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := &coalescer{ResponseWriter: w}
		h.ServeHTTP(c, r.WithContext(context.WithValue(r.Context(), coalescerKey{}, c)))
	})
}

// coalescerOf is the request's coalescer, nil (every method a plain
// pass-through) when the handler runs without one, as in tests.
func coalescerOf(ctx context.Context) *coalescer {
	c, _ := ctx.Value(coalescerKey{}).(*coalescer)
	return c
}

// Flush is connect-go's flush after each message: deferred while held.
func (c *coalescer) Flush() {
	if c.held {
		c.pending = true
		return
	}
	c.pending = false
	// connect-go's own flush has no error either: a broken stream fails
	// the next write.
	_ = http.NewResponseController(c.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the server's writer.
func (c *coalescer) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// hold defers flushes until release.
func (c *coalescer) hold() {
	if c != nil {
		c.held = true
	}
}

// release flushes what was written while held, once.
func (c *coalescer) release() {
	if c == nil {
		return
	}
	c.held = false
	if c.pending {
		c.Flush()
	}
}
