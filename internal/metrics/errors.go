package metrics

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// RecentErrors is how many of the daemon's latest errors GET /health lists.
const RecentErrors = 10

// ErrorEntry is one error the daemon hit.
type ErrorEntry struct {
	At time.Time
	// Op is what failed: a log message ("destroy sandbox"), a route pattern
	// answered with a 5xx, or "sandbox failed".
	Op      string
	Sandbox string // "" when the error concerns no one sandbox
	Message string
}

// Errors keeps the last few errors the daemon hit, newest last, and counts
// them all. An operator reading GET /health sees what went wrong lately
// without reading the daemon's log. Safe for concurrent use.
type Errors struct {
	mu    sync.Mutex
	max   int
	ring  []ErrorEntry // oldest first
	total uint64
	now   func() time.Time
}

// NewErrors keeps the last max errors (RecentErrors when max ≤ 0); now is
// the clock (nil: time.Now).
func NewErrors(max int, now func() time.Time) *Errors {
	if max <= 0 {
		max = RecentErrors
	}
	if now == nil {
		now = time.Now
	}
	return &Errors{max: max, now: now}
}

// Record adds an error.
func (e *Errors) Record(op, sandbox, message string) {
	ent := ErrorEntry{At: e.now().UTC(), Op: op, Sandbox: sandbox, Message: message}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.total++
	if len(e.ring) >= e.max {
		copy(e.ring, e.ring[1:])
		e.ring = e.ring[:len(e.ring)-1]
	}
	e.ring = append(e.ring, ent)
}

// Recent returns the kept errors, newest first.
func (e *Errors) Recent() []ErrorEntry {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]ErrorEntry, len(e.ring))
	for i, ent := range e.ring {
		out[len(e.ring)-1-i] = ent
	}
	return out
}

// Total is how many errors were recorded since the daemon started.
func (e *Errors) Total() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.total
}

// Handler wraps a log handler so that every record at warning level or
// above that carries an "err" attribute is also recorded: that is how the
// daemon reports a background operation that failed (a timed-out sandbox
// it could not kill, a pool it could not refill), so this catches them all
// without each call site knowing about health. Records without "err" are
// notices, not failures.
func (e *Errors) Handler(next slog.Handler) slog.Handler {
	return &errorHandler{next: next, errs: e}
}

type errorHandler struct {
	next  slog.Handler
	errs  *Errors
	attrs []slog.Attr // from WithAttrs (a logger's With), searched too
}

func (h *errorHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn || h.next.Enabled(ctx, l)
}

func (h *errorHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		var errMsg, sandbox string
		see := func(a slog.Attr) bool {
			switch a.Key {
			case "err":
				errMsg = a.Value.String()
			case "sandbox":
				sandbox = a.Value.String()
			}
			return true
		}
		for _, a := range h.attrs {
			see(a)
		}
		r.Attrs(see)
		if errMsg != "" {
			h.errs.Record(r.Message, sandbox, errMsg)
		}
	}
	if !h.next.Enabled(ctx, r.Level) {
		return nil
	}
	return h.next.Handle(ctx, r)
}

func (h *errorHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &errorHandler{next: h.next.WithAttrs(attrs), errs: h.errs, attrs: append(append([]slog.Attr(nil), h.attrs...), attrs...)}
}

func (h *errorHandler) WithGroup(name string) slog.Handler {
	return &errorHandler{next: h.next.WithGroup(name), errs: h.errs, attrs: h.attrs}
}
