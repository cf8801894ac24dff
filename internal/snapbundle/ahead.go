package snapbundle

import (
	"errors"
	"io"
	"sync"
)

// An importer does two things to every byte: read it off the connection
// and hash it (here), then decode and write it to disk (the storage). Ahead
// does the first in a goroutine of its own, a few chunks ahead of the
// second, so that on a machine with a spare core they overlap instead of
// taking turns.
const (
	aheadChunk  = 1 << 20
	aheadChunks = 4
)

type aheadChunkRead struct {
	b   []byte
	err error
}

// Ahead reads a bundle's body ahead of its reader (see ReadAhead).
type Ahead struct {
	r     *Reader
	full  chan aheadChunkRead
	free  chan []byte
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
	cur   []byte // what is left of the chunk being read
	chunk []byte // that chunk's buffer, returned to free when read
	err   error  // what ended the body
}

// ReadAhead starts reading r's body in a goroutine. Read the body from the
// Ahead, check it with its Verify, and Close it before the source of r may
// no longer be read (an HTTP handler's return).
func (r *Reader) ReadAhead() *Ahead {
	a := &Ahead{r: r, full: make(chan aheadChunkRead, aheadChunks), free: make(chan []byte, aheadChunks),
		stop: make(chan struct{}), done: make(chan struct{})}
	for range aheadChunks {
		a.free <- make([]byte, aheadChunk)
	}
	go a.fill()
	return a
}

func (a *Ahead) fill() {
	defer close(a.done)
	defer close(a.full)
	for {
		var buf []byte
		select {
		case buf = <-a.free:
		case <-a.stop:
			return
		}
		n, err := io.ReadFull(a.r, buf)
		if errors.Is(err, io.ErrUnexpectedEOF) {
			err = io.EOF // the body ended inside this chunk
		}
		select {
		case a.full <- aheadChunkRead{buf[:n], err}:
		case <-a.stop:
			return
		}
		if err != nil {
			return
		}
	}
}

// Read reads the body; io.EOF at its end.
func (a *Ahead) Read(p []byte) (int, error) {
	for len(a.cur) == 0 {
		if a.chunk != nil {
			a.free <- a.chunk[:cap(a.chunk)]
			a.chunk = nil
		}
		if a.err != nil {
			return 0, a.err
		}
		c, ok := <-a.full
		if !ok {
			return 0, io.ErrClosedPipe
		}
		a.cur, a.chunk, a.err = c.b, c.b, c.err
	}
	n := copy(p, a.cur)
	a.cur = a.cur[n:]
	return n, nil
}

// Verify reads what is left of the body and checks the trailer (see
// Reader.Verify).
func (a *Ahead) Verify() error {
	if _, err := io.Copy(io.Discard, a); err != nil {
		return err
	}
	<-a.done
	return a.r.Verify()
}

// Close stops the goroutine and waits for it: it may be inside a read of
// the source, which its own end (the peer's next bytes, or the connection
// closing) finishes. Cutting that read short with a past read deadline
// was tried: the server then closes the connection with the peer's bytes
// unread, the kernel answers with a reset, and the client loses the
// answer (a 409, say) it was about to read.
func (a *Ahead) Close() {
	a.once.Do(func() { close(a.stop) })
	<-a.done
}
