package sandboxlog

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
)

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
