package sandboxlog

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/warrenhq/warren/internal/procs"
)

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
	size   int64    // of current.log
	file   *os.File // current.log, open for appends while the log is in use
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
	s.closeFileLocked()
	s.closed = true
	close(s.changed)
	s.changed = make(chan struct{})
}

// closeFileLocked closes the current file held open for appends.
func (s *sandboxLog) closeFileLocked() {
	if s.file != nil {
		if err := s.file.Close(); err != nil {
			s.log.Warn("close sandbox log", "err", err)
		}
		s.file = nil
	}
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

// openLocked opens the current file for appending, making it if need be.
func (s *sandboxLog) openLocked() bool {
	if s.file != nil {
		return true
	}
	if s.closed {
		return false
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		s.log.Warn("make sandbox log dir", "err", err)
		return false
	}
	f, err := os.OpenFile(s.current(), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		s.log.Warn("open sandbox log", "err", err)
		return false
	}
	s.file = f
	return true
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
		s.closeFileLocked()
		if err := os.Rename(s.current(), s.previous()); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.log.Warn("rotate sandbox log", "err", err)
			return
		}
		s.size = 0
	}
	if !s.openLocked() {
		return
	}
	n, err := s.file.Write(buf.Bytes())
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
