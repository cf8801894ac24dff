// Package sandboxlog keeps one log per sandbox: the lines its processes
// print (stdout and stderr, split into lines) and the steps of its life
// (created, paused, a process started or exited, ...), in order, each with a
// sequence number that never repeats within the sandbox. A client reads it
// from a cursor (the last sequence number it saw) and can wait for more,
// which is how `warren logs -f` follows a sandbox.
//
// On disk a log is two files of JSON lines under <dir>/<sandbox id>/:
// current.log, and previous.log, the one before the last rotation. A file is
// rotated when it passes half the log's byte budget, so a log never holds
// more than about that budget. The files are on the host, outside the
// sandbox's filesystem: nothing inside the sandbox can rewrite its history.
//
// Everything written is untrusted sandbox output: lines are bounded, and
// invalid UTF-8 is replaced when encoded.
package sandboxlog

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/warrenhq/warren/internal/ids"
	"github.com/warrenhq/warren/internal/procs"
)

const (
	// DefaultMaxBytes is a sandbox's log budget on disk.
	DefaultMaxBytes = 8 << 20
	// MaxLine is the longest message kept in one entry; a longer line is
	// split into several entries.
	MaxLine = 8 << 10
	// MaxLimit bounds the entries one read returns.
	MaxLimit = 10000
	// tombstoneTTL is how long writes for a removed sandbox are ignored
	// (its collector or a late lifecycle event may still be on the way).
	tombstoneTTL = time.Hour
)

// Sources of entries.
const (
	SourceStdout    = "stdout"
	SourceStderr    = "stderr"
	SourceProcess   = "process"   // a process started or exited
	SourceLifecycle = "lifecycle" // the sandbox changed state
)

// Levels, least severe first.
var levels = []string{"debug", "info", "warn", "error"}

func levelRank(l string) int {
	for i, v := range levels {
		if v == l {
			return i
		}
	}
	return -1
}

// ValidLevel reports whether l is a level a query may filter on.
func ValidLevel(l string) bool { return levelRank(l) >= 0 }

// Entry is one line of a sandbox's log.
type Entry struct {
	Seq     int64     `json:"seq"`
	Time    time.Time `json:"ts"`
	Level   string    `json:"level"`
	Source  string    `json:"source"`
	PID     int32     `json:"pid,omitempty"`
	Tag     string    `json:"tag,omitempty"`
	Message string    `json:"msg"`

	// What makes a replay by the agent after a daemon restart harmless:
	// the process's sequence number, the stream offset just past an output
	// line, and whether the entry is a process's start or exit.
	PSeq uint64 `json:"pseq,omitempty"`
	Off  uint64 `json:"off,omitempty"`
	Kind string `json:"kind,omitempty"`
}

const (
	kindStarted = "started"
	kindExited  = "exited"
	// replayWindow is how much of the end of a log is read at load to find
	// where each process's output was logged up to. The agent replays only
	// what the collector's index had not saved (about 100 ms of output).
	replayWindow = 1 << 20
)

// Options configure a Logs.
type Options struct {
	Dir      string // one subdirectory per sandbox
	MaxBytes int64
	Log      *slog.Logger
	Now      func() time.Time
}

// Logs holds every sandbox's log. A nil *Logs does nothing, so hooks can
// call it unconditionally.
type Logs struct {
	opts Options

	mu      sync.Mutex
	logs    map[string]*sandboxLog
	removed map[string]time.Time
	closed  bool
}

// New returns the logs stored under opts.Dir.
func New(opts Options) *Logs {
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	// Both files together stay within the budget, and a file holds at least
	// a few maximal lines.
	opts.MaxBytes = max(opts.MaxBytes, 16*MaxLine*6)
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Logs{opts: opts, logs: map[string]*sandboxLog{}, removed: map[string]time.Time{}}
}

// get returns a sandbox's log, nil for a removed sandbox or a bad id.
func (l *Logs) get(id string) *sandboxLog {
	if l == nil || ids.Validate("sandbox id", id) != nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, gone := l.removed[id]; gone || l.closed {
		return nil
	}
	s := l.logs[id]
	if s == nil {
		s = &sandboxLog{
			dir: filepath.Join(l.opts.Dir, id), half: l.opts.MaxBytes / 2, now: l.opts.Now,
			log: l.opts.Log.With("sandbox", id), changed: make(chan struct{}),
			partial: map[streamKey][]byte{}, ends: map[streamKey]uint64{}, marks: map[procKey]uint8{},
		}
		l.logs[id] = s
	}
	return s
}

// Output takes bytes a process printed, found at stream offset off. Complete
// lines become entries; the rest waits for its newline. For a replayed
// process (p.Seq set), bytes already taken are skipped.
func (l *Logs) Output(id string, p procs.ProcessID, stderr bool, off uint64, data []byte) {
	if s := l.get(id); s != nil && len(data) > 0 {
		s.output(p, stderr, off, data)
	}
}

// Started records that a process started.
func (l *Logs) Started(id string, p procs.ProcessID, argv []string) {
	if s := l.get(id); s != nil {
		s.mark(p, kindStarted, Entry{Level: "info", Message: "started: " + strings.Join(argv, " ")})
	}
}

// Exited records that a process ended, after what it printed without a
// final newline.
func (l *Logs) Exited(id string, p procs.ProcessID, exit procs.Exit) {
	s := l.get(id)
	if s == nil {
		return
	}
	var how string
	switch {
	case exit.Error != "":
		how = "error: " + exit.Error
	case exit.TimedOut:
		how = "timed out"
	case exit.Signal != "":
		how = "killed by " + exit.Signal
	default:
		how = "code " + strconv.Itoa(int(exit.ExitCode))
	}
	level := "info"
	if exit.Error != "" || exit.TimedOut || exit.Signal != "" || exit.ExitCode != 0 {
		level = "warn"
	}
	s.mark(p, kindExited, Entry{Level: level, Message: "exited: " + how})
}

// Prepare finds or makes a sandbox's log on disk ahead of its first entry,
// so that the first entry costs only its write (a warm-pool sandbox's log
// is made while it waits, not when it is claimed).
func (l *Logs) Prepare(id string) {
	if s := l.get(id); s != nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.loadLocked()
		s.openLocked()
	}
}

// Event records a step of the sandbox's life.
func (l *Logs) Event(id string, level, message string) {
	if s := l.get(id); s != nil {
		s.append(Entry{Level: level, Source: SourceLifecycle, Message: message})
	}
}

// Remove deletes a sandbox's log; later writes for it are dropped.
func (l *Logs) Remove(id string) error {
	if l == nil {
		return nil
	}
	if err := ids.Validate("sandbox id", id); err != nil {
		return fmt.Errorf("remove sandbox log: %w", err)
	}
	now := l.opts.Now()
	l.mu.Lock()
	s := l.logs[id]
	delete(l.logs, id)
	for gone, at := range l.removed {
		if now.Sub(at) > tombstoneTTL {
			delete(l.removed, gone)
		}
	}
	l.removed[id] = now
	l.mu.Unlock()
	if s != nil {
		s.close()
	}
	if err := os.RemoveAll(filepath.Join(l.opts.Dir, id)); err != nil {
		return fmt.Errorf("remove log of %s: %w", id, err)
	}
	return nil
}

// Close closes every log's open file; later writes are dropped. The logs
// stay on disk for the next daemon.
func (l *Logs) Close() {
	if l == nil {
		return
	}
	l.mu.Lock()
	open := l.logs
	l.logs = map[string]*sandboxLog{}
	l.closed = true
	l.mu.Unlock()
	for _, s := range open {
		s.close()
	}
}

// Reconcile deletes the log of every sandbox not in keep.
func (l *Logs) Reconcile(keep map[string]bool) error {
	if l == nil {
		return nil
	}
	entries, err := os.ReadDir(l.opts.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list sandbox logs: %w", err)
	}
	var errs []error
	for _, e := range entries {
		if !keep[e.Name()] {
			errs = append(errs, l.Remove(e.Name()))
		}
	}
	return errors.Join(errs...)
}
