package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// LogEntry is one line of a sandbox's log: a line a process printed, a
// process starting or exiting, or a step of the sandbox's life. It is E2B's
// SandboxLogEntry; Fields carry "source" (stdout, stderr, process,
// lifecycle), "seq" (the entry's cursor), and "pid" and "tag" for process
// lines.
type LogEntry struct {
	Timestamp time.Time         `json:"timestamp"`
	Level     string            `json:"level"`
	Message   string            `json:"message"`
	Fields    map[string]string `json:"fields"`
}

// LogLine is E2B's older, plain shape of a log line.
type LogLine struct {
	Timestamp time.Time `json:"timestamp"`
	Line      string    `json:"line"`
}

// SandboxLogs is a page of a sandbox's log (GET /sandboxes/{id}/logs): the
// same entries in E2B's two shapes, and the cursor to read on from.
type SandboxLogs struct {
	Logs       []LogLine  `json:"logs"`
	LogEntries []LogEntry `json:"logEntries"`
	NextCursor int64      `json:"nextCursor"`
}

// LogsQuery selects entries of a sandbox's log.
type LogsQuery struct {
	// Cursor: entries after it (0 = from the start); pass NextCursor of the
	// previous page to read on. With Backward: entries before it (0 = from
	// the end), newest first.
	Cursor   int64
	Backward bool
	// Limit bounds the page (0: the server's default, 1000).
	Limit int
	// Level is the least severe level returned: debug, info, warn, error.
	Level string
	// Search keeps entries whose message contains it.
	Search string
	// Wait, when no entry is there yet, holds the call up to that long for
	// one (following a log; at most a minute).
	Wait time.Duration
}

// Logs reads a page of a sandbox's log.
func (s *SandboxesService) Logs(ctx context.Context, id string, q LogsQuery) (SandboxLogs, error) {
	v := url.Values{}
	if q.Cursor > 0 {
		v.Set("cursor", strconv.FormatInt(q.Cursor, 10))
	}
	if q.Backward {
		v.Set("direction", "backward")
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.Level != "" {
		v.Set("level", q.Level)
	}
	if q.Search != "" {
		v.Set("search", q.Search)
	}
	if q.Wait > 0 {
		v.Set("wait", strconv.FormatInt(q.Wait.Milliseconds(), 10))
	}
	var out SandboxLogs
	err := s.t.call(ctx, request{method: http.MethodGet, path: sandboxPath(id, "/logs"), query: v}, &out)
	return out, err
}
