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
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
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
	if _, gone := l.removed[id]; gone {
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

// Query selects entries of a log.
type Query struct {
	// After: entries with a greater sequence number (0: from the start).
	After int64
	// Since, when set, skips entries older than it (E2B's time cursor).
	Since time.Time
	// Until, when set with Backward, skips entries newer than it.
	Until time.Time
	// Limit bounds the answer (0 or > MaxLimit: MaxLimit).
	Limit int
	// Backward returns the newest matching entries first; After is then an
	// upper bound (entries with a smaller sequence number; 0: from the end).
	Backward bool
	// Level is the least severe level returned ("" = all).
	Level string
	// Search keeps entries whose message contains it.
	Search string
	// Wait, when nothing matches yet (forward reads only), is how long to
	// wait for an entry that does.
	Wait time.Duration
}

// Page is the answer to a read.
type Page struct {
	Entries []Entry
	// Next is the cursor to read on from: the sequence number of the last
	// entry considered (returned or filtered out), so that a follower with
	// filters does not read the same entries again.
	Next int64
}

// Read returns entries of a sandbox's log.
func (l *Logs) Read(ctx context.Context, id string, q Query) (Page, error) {
	if q.Level != "" && !ValidLevel(q.Level) {
		return Page{}, fmt.Errorf("level %q: want one of %s: %w", q.Level, strings.Join(levels, ", "), errdefs.ErrInvalid)
	}
	if q.Limit <= 0 || q.Limit > MaxLimit {
		q.Limit = MaxLimit
	}
	if q.After < 0 {
		return Page{}, fmt.Errorf("cursor %d: must not be negative: %w", q.After, errdefs.ErrInvalid)
	}
	s := l.get(id)
	if s == nil {
		return Page{}, fmt.Errorf("log of sandbox %q: %w", id, errdefs.ErrNotFound)
	}
	var deadline <-chan time.Time
	if q.Wait > 0 && !q.Backward {
		t := time.NewTimer(q.Wait)
		defer t.Stop()
		deadline = t.C
	}
	for {
		changed := s.changedChan()
		page, err := s.read(q)
		if err != nil || len(page.Entries) > 0 || deadline == nil {
			return page, err
		}
		q.After = max(q.After, page.Next)
		select {
		case <-changed:
		case <-deadline:
			return page, nil
		case <-ctx.Done():
			return page, nil
		}
	}
}

// streamKey names one output stream of one process.
type streamKey struct {
	pid    int32
	pseq   uint64
	stderr bool
}

type procKey struct {
	pid  int32
	pseq uint64
}

// Marks of a process's start and exit seen in the log at load.
const (
	markStarted = 1 << iota
	markExited
)

// sandboxLog is one sandbox's log.
type sandboxLog struct {
	dir  string
	half int64 // a file is rotated past this size
	now  func() time.Time
	log  *slog.Logger

	mu     sync.Mutex
	loaded bool
	closed bool
	seq    int64
	last   time.Time
	size   int64 // of current.log
	// partial holds each stream's bytes after its last newline; ends,
	// the offset just past what was taken (logged or in partial) of a
	// replayable process's stream; marks, which starts and exits of
	// replayable processes the log held at load.
	partial map[streamKey][]byte
	ends    map[streamKey]uint64
	marks   map[procKey]uint8
	changed chan struct{}
}

func (s *sandboxLog) current() string  { return filepath.Join(s.dir, "current.log") }
func (s *sandboxLog) previous() string { return filepath.Join(s.dir, "previous.log") }

func (s *sandboxLog) changedChan() chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

func (s *sandboxLog) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	close(s.changed)
	s.changed = make(chan struct{})
}

// loadLocked finds where the log on disk ends: its last sequence number and
// time, from the tail of the newest file that has entries.
func (s *sandboxLog) loadLocked() {
	if s.loaded {
		return
	}
	s.loaded = true
	if fi, err := os.Stat(s.current()); err == nil {
		s.size = fi.Size()
	}
	for _, p := range []string{s.current(), s.previous()} {
		if e, ok := lastEntry(p); ok {
			s.seq, s.last = e.Seq, e.Time
			break
		}
	}
	// Where each process's output was logged up to, and which starts and
	// exits are in, so that the agent's replay after a restart is taken
	// once.
	window := int64(replayWindow)
	for _, p := range []string{s.current(), s.previous()} {
		n, err := scanTail(p, window, func(e *Entry) {
			if e.PSeq == 0 {
				return
			}
			pk := procKey{e.PID, e.PSeq}
			switch e.Kind {
			case kindStarted:
				s.marks[pk] |= markStarted
			case kindExited:
				s.marks[pk] |= markExited
			default:
				k := streamKey{e.PID, e.PSeq, e.Source == SourceStderr}
				s.ends[k] = max(s.ends[k], e.Off)
			}
		})
		if err != nil {
			s.log.Warn("read the end of a sandbox log", "err", err)
		}
		if window -= n; window <= 0 {
			break
		}
	}
}

// mark logs a process's start or exit once: a replayed one found in the log
// at load is skipped. An exit first logs what the process printed after its
// last newline.
func (s *sandboxLog) mark(p procs.ProcessID, kind string, e Entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loadLocked()
	pk := procKey{p.PID, p.Seq}
	bit := uint8(markStarted)
	if kind == kindExited {
		bit = markExited
	}
	if p.Seq != 0 && s.marks[pk]&bit != 0 {
		if kind == kindExited {
			delete(s.marks, pk)
		}
		return
	}
	var batch []Entry
	if kind == kindExited {
		for _, stderr := range []bool{false, true} {
			k := streamKey{p.PID, p.Seq, stderr}
			if buf := s.partial[k]; len(buf) > 0 {
				batch = appendLine(batch, p, stderr, s.ends[k], buf)
			}
			delete(s.partial, k)
			delete(s.ends, k)
		}
		delete(s.marks, pk)
	}
	e.Source, e.PID, e.Tag, e.PSeq, e.Kind = SourceProcess, p.PID, p.Tag, p.Seq, kind
	s.appendLocked(append(batch, e)...)
}

// output splits data, found at stream offset off, into lines.
func (s *sandboxLog) output(p procs.ProcessID, stderr bool, off uint64, data []byte) {
	k := streamKey{p.PID, p.Seq, stderr}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loadLocked()
	if p.Seq != 0 {
		end, known := s.ends[k]
		switch {
		case !known:
		case off+uint64(len(data)) <= end:
			return // a replay of what was taken
		case off < end:
			data = data[end-off:]
			off = end
		case off > end && len(s.partial[k]) > 0:
			// Bytes are missing (dropped by the agent, or taken before a
			// crash without being logged): the partial line ends here.
			s.appendLocked(appendLine(nil, p, stderr, end, s.partial[k])...)
			delete(s.partial, k)
		}
		s.ends[k] = off + uint64(len(data))
	}
	buf := s.partial[k]
	var batch []Entry
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			buf = append(buf, data...)
			break
		}
		line := append(buf, data[:i]...)
		buf = nil
		off += uint64(i + 1)
		data = data[i+1:]
		batch = appendLine(batch, p, stderr, off, bytes.TrimSuffix(line, []byte("\r")))
	}
	// A line too long to wait for: its head goes out in pieces.
	for len(buf) >= MaxLine {
		batch = appendLine(batch, p, stderr, off-uint64(len(buf)-MaxLine), buf[:MaxLine])
		buf = buf[MaxLine:]
	}
	if len(buf) == 0 {
		delete(s.partial, k)
	} else {
		s.partial[k] = bytes.Clone(buf)
	}
	s.appendLocked(batch...)
}

// appendLine adds the entries of one line that ends at stream offset end.
func appendLine(batch []Entry, p procs.ProcessID, stderr bool, end uint64, line []byte) []Entry {
	e := Entry{Level: "info", Source: SourceStdout, PID: p.PID, Tag: p.Tag, PSeq: p.Seq}
	if stderr {
		e.Level, e.Source = "error", SourceStderr
	}
	if p.Seq != 0 {
		e.Off = end
	}
	for len(line) > MaxLine {
		e.Message = string(line[:MaxLine])
		batch = append(batch, e)
		line = line[MaxLine:]
	}
	e.Message = string(line)
	return append(batch, e)
}

func (s *sandboxLog) append(e Entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.appendLocked(e)
}

// appendLocked numbers, times and writes entries in one write. Times never
// go backwards within a log, so that a time cursor is a position.
func (s *sandboxLog) appendLocked(batch ...Entry) {
	if len(batch) == 0 || s.closed {
		return
	}
	s.loadLocked()
	now := s.now().UTC()
	if now.Before(s.last) {
		now = s.last
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for i := range batch {
		e := &batch[i]
		e.Seq, e.Time = s.seq+int64(i)+1, now
		if err := enc.Encode(e); err != nil {
			s.log.Warn("encode log entry", "err", err)
			return
		}
	}
	if s.size > 0 && s.size+int64(buf.Len()) > s.half {
		if err := os.Rename(s.current(), s.previous()); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.log.Warn("rotate sandbox log", "err", err)
			return
		}
		s.size = 0
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		s.log.Warn("make sandbox log dir", "err", err)
		return
	}
	f, err := os.OpenFile(s.current(), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		s.log.Warn("open sandbox log", "err", err)
		return
	}
	n, err := f.Write(buf.Bytes())
	f.Close()
	s.size += int64(n)
	if err != nil {
		// A torn line is skipped by readers; the numbers stay unique.
		s.log.Warn("write sandbox log", "err", err)
	}
	s.seq += int64(len(batch))
	s.last = now
	close(s.changed)
	s.changed = make(chan struct{})
}

// read answers one query from the files on disk.
func (s *sandboxLog) read(q Query) (Page, error) {
	s.mu.Lock()
	s.loadLocked()
	s.mu.Unlock()
	minLevel := levelRank(q.Level)
	match := func(e *Entry) bool {
		if !q.Since.IsZero() && e.Time.Before(q.Since) {
			return false
		}
		if !q.Until.IsZero() && e.Time.After(q.Until) {
			return false
		}
		if q.Backward && q.After > 0 && e.Seq >= q.After {
			return false
		}
		if minLevel > 0 && levelRank(e.Level) < minLevel {
			return false
		}
		return q.Search == "" || strings.Contains(e.Message, q.Search)
	}
	page := Page{Next: q.After}
	// Files are read oldest first; a rotation between opening the two is
	// harmless (at worst an entry is read twice and dropped by the seq check).
	for _, p := range []string{s.previous(), s.current()} {
		done, err := scanFile(p, q, func(e *Entry) bool {
			if !q.Backward {
				if e.Seq <= page.Next {
					return true
				}
				page.Next = e.Seq
			}
			if !match(e) {
				return true
			}
			page.Entries = append(page.Entries, *e)
			if q.Backward && len(page.Entries) > q.Limit {
				page.Entries = page.Entries[1:]
			}
			return q.Backward || len(page.Entries) < q.Limit
		})
		if err != nil {
			return Page{}, err
		}
		if done {
			break
		}
	}
	if q.Backward {
		for i, j := 0, len(page.Entries)-1; i < j; i, j = i+1, j-1 {
			page.Entries[i], page.Entries[j] = page.Entries[j], page.Entries[i]
		}
		if n := len(page.Entries); n > 0 {
			page.Next = page.Entries[n-1].Seq
		}
	}
	return page, nil
}

// scanFile calls fn for each entry of a file from the first one that can
// match q, until fn returns false (then done is true). A missing file has
// no entries; a line that does not parse (torn by a crash) is skipped.
func scanFile(path string, q Query, fn func(*Entry) bool) (done bool, err error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("open sandbox log: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return false, fmt.Errorf("stat sandbox log: %w", err)
	}
	var from int64
	if !q.Backward {
		from, err = seek(f, fi.Size(), func(e *Entry) bool {
			return e.Seq > q.After && (q.Since.IsZero() || !e.Time.Before(q.Since))
		})
		if err != nil {
			return false, err
		}
	}
	r := bufio.NewReaderSize(io.NewSectionReader(f, from, fi.Size()-from), 64<<10)
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// Longer than any entry we write: skip it whole.
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = r.ReadSlice('\n')
			}
			continue
		}
		if len(line) > 0 && line[len(line)-1] == '\n' {
			var e Entry
			if json.Unmarshal(line, &e) == nil && e.Seq > 0 && !fn(&e) {
				return true, nil
			}
		}
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("read sandbox log: %w", err)
		}
	}
}

// seek returns the offset of the first line of f for which ok holds, by
// binary search over byte offsets: entries are in order, so ok is false up
// to some line and true from there on.
func seek(f *os.File, size int64, ok func(*Entry) bool) (int64, error) {
	lo, hi := int64(0), size // lo is a line start; the answer is in [lo, hi]
	for hi-lo > 64<<10 {
		mid := lo + (hi-lo)/2
		start, end, e, found, err := lineAfter(f, mid, hi)
		if err != nil {
			return 0, err
		}
		switch {
		case !found:
			hi = mid
		case ok(e):
			hi = start
		default:
			lo = end
		}
	}
	return lo, nil
}

// lineAfter finds the first whole, parseable line that starts at or after
// off and before limit.
func lineAfter(f *os.File, off, limit int64) (start, end int64, e *Entry, found bool, err error) {
	r := bufio.NewReaderSize(io.NewSectionReader(f, off-1, limit-off+1), 64<<10)
	pos := off - 1
	// Skip the rest of the line that holds off-1 (a whole line if off-1
	// ends one).
	skipped, err := r.ReadSlice('\n')
	for errors.Is(err, bufio.ErrBufferFull) {
		pos += int64(len(skipped))
		skipped, err = r.ReadSlice('\n')
	}
	pos += int64(len(skipped))
	for err == nil && pos < limit {
		line, rerr := r.ReadSlice('\n')
		if errors.Is(rerr, bufio.ErrBufferFull) {
			for errors.Is(rerr, bufio.ErrBufferFull) {
				pos += int64(len(line))
				line, rerr = r.ReadSlice('\n')
			}
			pos += int64(len(line))
			continue
		}
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return 0, 0, nil, false, fmt.Errorf("read sandbox log: %w", rerr)
		}
		var ent Entry
		if len(line) > 0 && line[len(line)-1] == '\n' && json.Unmarshal(line, &ent) == nil && ent.Seq > 0 {
			return pos, pos + int64(len(line)), &ent, true, nil
		}
		pos += int64(len(line))
		err = rerr
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, 0, nil, false, fmt.Errorf("read sandbox log: %w", err)
	}
	return 0, 0, nil, false, nil
}

// lastEntry reads the last whole entry of a file.
func lastEntry(path string) (Entry, bool) {
	f, err := os.Open(path)
	if err != nil {
		return Entry{}, false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Entry{}, false
	}
	// An entry's line is at most MaxLine bytes of message, escaped (six
	// bytes per byte at worst), plus its fields.
	const tail = 6*MaxLine + 4096
	from := max(0, fi.Size()-tail)
	buf := make([]byte, fi.Size()-from)
	if _, err := f.ReadAt(buf, from); err != nil && !errors.Is(err, io.EOF) {
		return Entry{}, false
	}
	lines := bytes.Split(buf, []byte("\n"))
	// The last element follows the final newline (empty, or a torn line).
	for i := len(lines) - 2; i >= 0; i-- {
		var e Entry
		if json.Unmarshal(lines[i], &e) == nil && e.Seq > 0 {
			return e, true
		}
	}
	return Entry{}, false
}

// scanTail calls fn for each whole entry in the last n bytes of a file and
// returns how many bytes it covered (the file's size when smaller).
func scanTail(path string, n int64, fn func(*Entry)) (int64, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("open sandbox log: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("stat sandbox log: %w", err)
	}
	from := max(0, fi.Size()-n)
	r := bufio.NewReaderSize(io.NewSectionReader(f, from, fi.Size()-from), 64<<10)
	first := from > 0 // the first line read may be the end of a longer one
	for {
		line, err := r.ReadSlice('\n')
		for errors.Is(err, bufio.ErrBufferFull) {
			first = true // too long to be an entry: skip the rest
			_, err = r.ReadSlice('\n')
		}
		if !first && len(line) > 0 && line[len(line)-1] == '\n' {
			var e Entry
			if json.Unmarshal(line, &e) == nil && e.Seq > 0 {
				fn(&e)
			}
		}
		first = false
		if errors.Is(err, io.EOF) {
			return fi.Size() - from, nil
		}
		if err != nil {
			return 0, fmt.Errorf("read sandbox log: %w", err)
		}
	}
}
