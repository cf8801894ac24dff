package tplbuild

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
)

// LogEntry is one line of a build's log, as the SDK's onBuildLogs shows it.
type LogEntry struct {
	Timestamp time.Time `json:"timestamp"`
	Level     string    `json:"level"` // debug, info, warn, error
	Message   string    `json:"message"`
	Step      string    `json:"step,omitempty"`
}

// Reason says why a build failed: the step ("1" is the first step) and
// the log lines that tell.
type Reason struct {
	Message    string     `json:"message"`
	Step       string     `json:"step,omitempty"`
	LogEntries []LogEntry `json:"logEntries"`
}

// Status is a build's state and its log from an offset on.
type Status struct {
	TemplateID string     `json:"templateID"`
	BuildID    string     `json:"buildID"`
	Status     string     `json:"status"`
	LogEntries []LogEntry `json:"logEntries"`
	Logs       []string   `json:"logs"`
	Reason     *Reason    `json:"reason,omitempty"`
	// Network is warren's extension: the build sandbox's network.
	Network string `json:"network,omitempty"`
}

// maxLogEntries bounds one build's log held in memory.
const maxLogEntries = 20000

// buildLog is a build's log while the server runs.
type buildLog struct {
	mu      sync.Mutex
	entries []LogEntry
	failure []LogEntry // the failed step's output, for the reason
}

func (l *buildLog) add(level, step, format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.entries) >= maxLogEntries {
		return
	}
	l.entries = append(l.entries, LogEntry{Timestamp: time.Now().UTC(), Level: level, Message: fmt.Sprintf(format, args...), Step: step})
}

// output logs a command's output line by line.
func (l *buildLog) output(level, step, out string) []LogEntry {
	var added []LogEntry
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if line == "" {
			continue
		}
		l.add(level, step, "%s", line)
		added = append(added, LogEntry{Timestamp: time.Now().UTC(), Level: level, Message: line, Step: step})
	}
	return added
}

func (l *buildLog) from(offset int) []LogEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	if offset < 0 || offset >= len(l.entries) {
		return []LogEntry{}
	}
	return append([]LogEntry(nil), l.entries[offset:]...)
}

// Status answers a build's status with its log from logsOffset on.
func (s *Service) Status(ctx context.Context, team, templateID, buildID string, logsOffset int) (Status, error) {
	tmpl, err := s.template(ctx, team, templateID)
	if err != nil {
		return Status{}, err
	}
	b, err := s.cfg.Store.GetTemplateBuild(ctx, tmpl.ID, buildID)
	if err != nil {
		return Status{}, err
	}
	if logsOffset < 0 {
		return Status{}, fmt.Errorf("logsOffset %d: want 0 or more: %w", logsOffset, errdefs.ErrInvalid)
	}
	st := Status{TemplateID: tmpl.ID, BuildID: b.ID, Status: b.Status, LogEntries: []LogEntry{}, Logs: []string{}, Network: b.Network}
	s.mu.Lock()
	l := s.logs[b.ID]
	s.mu.Unlock()
	if l == nil && (b.Status == StatusReady || b.Status == StatusError) {
		l = s.loadLog(b.ID) // finished before the server restarted
	}
	if l != nil {
		st.LogEntries = l.from(logsOffset)
		for _, e := range st.LogEntries {
			st.Logs = append(st.Logs, e.Message)
		}
	}
	if b.Status == StatusError {
		st.Reason = &Reason{Message: b.Reason, Step: b.Step, LogEntries: []LogEntry{}}
		if l != nil {
			l.mu.Lock()
			st.Reason.LogEntries = append(st.Reason.LogEntries, l.failure...)
			l.mu.Unlock()
		}
	}
	return st, nil
}
