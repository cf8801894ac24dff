package server

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/sandboxlog"
)

const (
	// defaultLogLimit is E2B's page size for logs.
	defaultLogLimit = 1000
	// maxLogWait bounds how long a read waits for a new entry.
	maxLogWait = time.Minute
	// maxLogSearch bounds the search string.
	maxLogSearch = 1024
)

// logRoutes serve a sandbox's log.
type logRoutes struct {
	records Records
	logs    *sandboxlog.Logs
}

// sandboxLogs serves GET /sandboxes/{id}/logs: the sandbox's log from a
// cursor. `cursor` is the sequence number of the last entry read (the
// answer's nextCursor), `start` E2B's time cursor in Unix milliseconds;
// `wait` (ms) holds the call until an entry comes, for following.
func (s *logRoutes) sandboxLogs(w http.ResponseWriter, r *http.Request) {
	page, ok := s.readLogs(w, r, false)
	if !ok {
		return
	}
	out := client.SandboxLogs{Logs: []client.LogLine{}, LogEntries: []client.LogEntry{}, NextCursor: page.Next}
	for _, e := range page.Entries {
		out.Logs = append(out.Logs, client.LogLine{Timestamp: e.Time, Line: e.Message})
		out.LogEntries = append(out.LogEntries, logEntry(e))
	}
	writeJSON(w, http.StatusOK, out)
}

// sandboxLogsV2 serves E2B's GET /v2/sandboxes/{id}/logs, whose cursor is
// a time in Unix milliseconds: forward, entries from it; backward, entries
// up to it, newest first.
func (s *logRoutes) sandboxLogsV2(w http.ResponseWriter, r *http.Request) {
	page, ok := s.readLogs(w, r, true)
	if !ok {
		return
	}
	type v2 struct {
		Logs       []client.LogEntry `json:"logs"`
		NextCursor int64             `json:"nextCursor"`
	}
	out := v2{Logs: []client.LogEntry{}, NextCursor: page.Next}
	for _, e := range page.Entries {
		out.Logs = append(out.Logs, logEntry(e))
	}
	writeJSON(w, http.StatusOK, out)
}

// readLogs answers a logs request's query, or writes its error.
func (s *logRoutes) readLogs(w http.ResponseWriter, r *http.Request, timeCursor bool) (sandboxlog.Page, bool) {
	q, err := logQuery(r, timeCursor)
	if err == nil {
		_, err = s.records.Get(r.Context(), teamOf(r), r.PathValue("id"))
	}
	var page sandboxlog.Page
	if err == nil {
		page, err = s.logs.Read(r.Context(), r.PathValue("id"), q)
	}
	if err != nil {
		writeError(w, r, err)
		return page, false
	}
	return page, true
}

func logEntry(e sandboxlog.Entry) client.LogEntry {
	f := map[string]string{"source": e.Source, "seq": strconv.FormatInt(e.Seq, 10)}
	if e.PID != 0 {
		f["pid"] = strconv.Itoa(int(e.PID))
	}
	if e.Tag != "" {
		f["tag"] = e.Tag
	}
	return client.LogEntry{Timestamp: e.Time, Level: e.Level, Message: e.Message, Fields: f}
}

// logQuery reads a logs request's parameters; timeCursor says `cursor` is
// E2B v2's time in milliseconds rather than a sequence number.
func logQuery(r *http.Request, timeCursor bool) (sandboxlog.Query, error) {
	v := r.URL.Query()
	q := sandboxlog.Query{Limit: defaultLogLimit, Level: v.Get("level"), Search: v.Get("search")}
	num := func(name string) (int64, error) {
		s := v.Get(name)
		if s == "" {
			return 0, nil
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%s %q: want a non-negative integer: %w", name, s, errdefs.ErrInvalid)
		}
		return n, nil
	}
	switch d := v.Get("direction"); d {
	case "", "forward":
	case "backward":
		q.Backward = true
	default:
		return q, fmt.Errorf("direction %q: want forward or backward: %w", d, errdefs.ErrInvalid)
	}
	if q.Level != "" && !sandboxlog.ValidLevel(q.Level) {
		return q, fmt.Errorf("level %q: want debug, info, warn or error: %w", q.Level, errdefs.ErrInvalid)
	}
	if len(q.Search) > maxLogSearch {
		return q, fmt.Errorf("search is longer than %d bytes: %w", maxLogSearch, errdefs.ErrInvalid)
	}
	limit, err := num("limit")
	if err != nil {
		return q, err
	}
	if v.Has("limit") {
		if limit < 1 || limit > sandboxlog.MaxLimit {
			return q, fmt.Errorf("limit %d: want 1 to %d: %w", limit, sandboxlog.MaxLimit, errdefs.ErrInvalid)
		}
		q.Limit = int(limit)
	}
	cursor, err := num("cursor")
	if err != nil {
		return q, err
	}
	start, err := num("start")
	if err != nil {
		return q, err
	}
	if timeCursor {
		start, cursor = cursor, 0
	}
	if start > 0 {
		if q.Backward {
			q.Until = time.UnixMilli(start)
		} else {
			q.Since = time.UnixMilli(start)
		}
	}
	q.After = cursor
	wait, err := num("wait")
	if err != nil {
		return q, err
	}
	if wait > maxLogWait.Milliseconds() {
		return q, fmt.Errorf("wait %d ms: at most %d: %w", wait, maxLogWait.Milliseconds(), errdefs.ErrInvalid)
	}
	q.Wait = time.Duration(wait) * time.Millisecond
	return q, nil
}
