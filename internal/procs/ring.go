package procs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// fileRing is one output stream of one process on disk: a file of at most
// size bytes used circularly, so byte n of the stream lives at n % size.
// [start, end) is what is kept. Rewriting a range with the same bytes (as
// happens when the agent replays from offsets persisted a moment late) is
// harmless, which is what makes a kill -9 of the daemon safe.
type fileRing struct {
	path       string
	size       int64
	start, end uint64
}

// write stores data found at stream offset off and returns the bytes that
// were new and their offset. Bytes already held are skipped; a jump past end
// (output the agent had to drop) starts afresh at off.
func (r *fileRing) write(off uint64, data []byte) (uint64, []byte, error) {
	if off+uint64(len(data)) <= r.end {
		return 0, nil, nil
	}
	if off < r.end {
		data = data[r.end-off:]
		off = r.end
	}
	if off > r.end {
		r.start, r.end = off, off
	}
	freshOff, fresh := off, data
	if int64(len(data)) > r.size {
		skip := len(data) - int(r.size)
		data = data[skip:]
		off += uint64(skip)
		r.start, r.end = off, off
	}
	if len(data) == 0 {
		return 0, nil, nil
	}
	f, err := os.OpenFile(r.path, os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return 0, nil, fmt.Errorf("open output ring: %w", err)
	}
	defer f.Close()
	pos := int64(off % uint64(r.size))
	first := data[:min(int64(len(data)), r.size-pos)]
	if _, err := f.WriteAt(first, pos); err != nil {
		return 0, nil, fmt.Errorf("write output ring: %w", err)
	}
	if rest := data[len(first):]; len(rest) > 0 {
		if _, err := f.WriteAt(rest, 0); err != nil {
			return 0, nil, fmt.Errorf("write output ring: %w", err)
		}
	}
	r.end = off + uint64(len(data))
	if r.end-r.start > uint64(r.size) {
		r.start = r.end - uint64(r.size)
	}
	return freshOff, fresh, nil
}

// read returns up to limit bytes from off (or from start when off is older)
// and the offset of the first byte returned.
func (r *fileRing) read(off uint64, limit int) ([]byte, uint64, error) {
	at := max(off, r.start)
	if at >= r.end {
		return nil, at, nil
	}
	n := int(min(r.end-at, uint64(limit)))
	f, err := os.Open(r.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, r.end, nil // nothing kept (e.g. removed by hand)
	}
	if err != nil {
		return nil, at, fmt.Errorf("open output ring: %w", err)
	}
	defer f.Close()
	buf := make([]byte, n)
	pos := int64(at % uint64(r.size))
	first := buf[:min(int64(n), r.size-pos)]
	if _, err := f.ReadAt(first, pos); err != nil && !errors.Is(err, io.EOF) {
		return nil, at, fmt.Errorf("read output ring: %w", err)
	}
	if rest := buf[len(first):]; len(rest) > 0 {
		if _, err := f.ReadAt(rest, 0); err != nil && !errors.Is(err, io.EOF) {
			return nil, at, fmt.Errorf("read output ring: %w", err)
		}
	}
	return buf, at, nil
}
