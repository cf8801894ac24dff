package btrfs

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/storage"
)

var _ storage.Transferer = (*Storage)(nil)

// TransferFormat implements storage.Transferer.
func (ar *archives) TransferFormat() string { return "btrfs-send-v1" }

// openReadOnly opens a volume to send and checks that it is read-only (the
// send ioctl refuses others).
func (ar *archives) openReadOnly(k storage.Key) (*os.File, error) {
	if err := k.Validate(); err != nil {
		return nil, err
	}
	f, err := ar.vols.openSubvol(k)
	if err != nil {
		return nil, err
	}
	flags, err := subvolGetFlags(int(f.Fd()))
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("read the flags of %s: %w", k, errnoKind(err))
	}
	if flags&subvolRdonly == 0 {
		f.Close()
		return nil, fmt.Errorf("%s is writable; only read-only volumes can be sent: %w", k, errdefs.ErrInvalid)
	}
	return f, nil
}

// Export implements storage.Transferer: the send ioctl writes into a pipe,
// copied to w as it comes. A whole export reads the volume's files into the
// page cache ahead of the send (see prefetcher).
func (ar *archives) Export(ctx context.Context, key, base storage.Key, w io.Writer) error {
	src, err := ar.openReadOnly(key)
	if err != nil {
		return fmt.Errorf("export %s: %w", key, err)
	}
	defer src.Close()
	var parentID uint64
	if base != (storage.Key{}) {
		b, err := ar.openReadOnly(base)
		if err != nil {
			return fmt.Errorf("export %s against %s: %w", key, base, err)
		}
		defer b.Close()
		if parentID, err = subvolID(int(b.Fd())); err != nil {
			return fmt.Errorf("export %s: id of %s: %w", key, base, errnoKind(err))
		}
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("export %s: %w", key, err)
	}
	growPipe(pw)
	sent := make(chan error, 1)
	go func() {
		err := sendDelta(int(src.Fd()), parentID, pw)
		pw.Close()
		sent <- err
	}()
	relay := &countingReader{r: pr}
	if base == (storage.Key{}) {
		pctx, stop := context.WithCancel(ctx)
		p := &prefetcher{root: ar.vols.Path(key)}
		relay.to = &p.sent
		done := make(chan struct{})
		go func() { p.run(pctx); close(done) }()
		defer func() { stop(); <-done }()
	}
	cerr := copyWhole(w, relay, make([]byte, 1<<20))
	// Closing the read end stops a send whose reader went away (EPIPE).
	pr.Close()
	serr := <-sent
	if cerr != nil {
		return fmt.Errorf("export %s: write the stream: %w", key, cerr)
	}
	if serr != nil {
		return fmt.Errorf("export %s: send: %w", key, errnoKind(serr))
	}
	return ctx.Err()
}

// copyWhole copies r to w in writes that fill buf (the last one excepted).
// A read of the send's pipe returns what the send has put there so far,
// often a few commands; the bundle writer frames a whole buffer straight
// from it, where smaller pieces are first copied into its own.
func copyWhole(w io.Writer, r io.Reader, buf []byte) error {
	for {
		n, err := io.ReadFull(r, buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		switch {
		case err == io.EOF || err == io.ErrUnexpectedEOF:
			return nil
		case err != nil:
			return err
		}
	}
}

// growPipe lets the send run ahead of a slower writer (hashing, the
// network) by a few MiB; the default 64 KiB holds one command. The daemon
// may go past fs.pipe-max-size (1 MiB by default) as root; best effort.
func growPipe(pw *os.File) {
	for _, size := range []int{8 << 20, 1 << 20} {
		if _, err := unix.FcntlInt(pw.Fd(), unix.F_SETPIPE_SZ, size); err == nil {
			return
		}
	}
}

// countingReader reads from r and adds what it read to *to (when set): how
// far the send is, for the prefetcher.
type countingReader struct {
	r  io.Reader
	to *atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if c.to != nil {
		c.to.Add(int64(n))
	}
	return n, err
}

// Import implements storage.Transferer with warren's own receive (see
// applier), replayed as the stream arrives into a volume under a name no
// record has (importing-<name>): a delta into a writable snapshot of base,
// a full stream into a new empty volume. Once verify passes, the volume is
// written back, marked as received from the stream's volume (so a later
// delta against it finds it), made read-only and renamed to key. A crash
// midway leaves only the unnamed volume, which start-up removes.
func (ar *archives) Import(ctx context.Context, r io.Reader, base, key storage.Key, verify func() error) error {
	building := storage.Key{Kind: key.Kind, Name: "importing-" + key.Name}
	for _, k := range []storage.Key{key, building} {
		if err := k.Validate(); err != nil {
			return err
		}
	}
	if _, err := ar.vols.Stat(ctx, key); err == nil {
		return fmt.Errorf("import %s: the volume exists already: %w", key, errdefs.ErrAlreadyExists)
	}
	s, err := newStreamReader(r)
	if err != nil {
		return fmt.Errorf("import %s: %w", key, err)
	}
	head, full, err := readAnyHead(s)
	if err != nil {
		return fmt.Errorf("import %s: %w", key, err)
	}
	var baseVol *os.File
	if base != (storage.Key{}) {
		if baseVol, err = ar.importBase(base, head, full); err != nil {
			return fmt.Errorf("import %s: %w", key, err)
		}
		defer baseVol.Close()
	} else if !full {
		return fmt.Errorf("import %s: the stream is a delta against volume %s, but no base was named: %w", key, head.parentUUID, errdefs.ErrInvalid)
	}
	if err := ar.vols.Delete(ctx, building); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("import %s: remove leftover %s: %w", key, building, err)
	}
	if baseVol != nil {
		err = ar.snapshotInto(baseVol, building, false)
	} else {
		_, err = ar.vols.Create(ctx, building)
	}
	if err != nil {
		return fmt.Errorf("import %s: %w", key, err)
	}
	placed := false
	defer func() {
		if !placed {
			if err := ar.vols.Delete(context.WithoutCancel(ctx), building); err != nil {
				ar.log.Warn("remove a volume whose import failed", "volume", building.String(), "err", err)
			}
		}
	}()
	if err := ar.receive(ctx, s, head, baseVol, building, verify); err != nil {
		return fmt.Errorf("import %s: %w", key, err)
	}
	if err := ar.rename(building, key); err != nil {
		return fmt.Errorf("import %s: %w", key, err)
	}
	placed = true
	return nil
}

// importBase opens the base a delta is imported onto and checks that the
// stream is a delta against it.
func (ar *archives) importBase(base storage.Key, head streamHead, full bool) (*os.File, error) {
	if full {
		return nil, fmt.Errorf("the stream is whole, not a delta against %s: %w", base, errdefs.ErrInvalid)
	}
	b, err := ar.openReadOnly(base)
	if err != nil {
		return nil, err
	}
	info, err := getSubvolInfo(int(b.Fd()))
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("read the identity of %s: %w", base, errnoKind(err))
	}
	if head.parentUUID != info.uuid && (info.received.zero() || head.parentUUID != info.received) {
		b.Close()
		return nil, fmt.Errorf("the stream is a delta against volume %s, which %s is not (was it imported from that snapshot's export?): %w", head.parentUUID, base, errdefs.ErrInvalid)
	}
	return b, nil
}

// receive replays the rest of a stream into building, runs verify, and
// makes building whole: written back, marked received, read-only.
func (ar *archives) receive(ctx context.Context, s *streamReader, head streamHead, base *os.File, building storage.Key, verify func() error) error {
	root, err := ar.vols.openSubvol(building)
	if err != nil {
		return err
	}
	defer root.Close()
	a := &applier{root: root, self: head.uuid, parent: head.parentUUID, parentView: base}
	start := time.Now()
	err = a.apply(s)
	a.closeOpen()
	if err != nil {
		return err
	}
	applied := time.Now()
	defer func() {
		ar.log.Debug("received volume", "volume", building.String(), "bytes", a.written,
			"apply", applied.Sub(start), "verify_and_write_back", time.Since(applied))
	}()
	if err := ctx.Err(); err != nil {
		return err
	}
	if verify != nil {
		if err := verify(); err != nil {
			return err
		}
	}
	if err := unix.Syncfs(int(root.Fd())); err != nil {
		return fmt.Errorf("write back: %w", err)
	}
	if err := setReceived(int(root.Fd()), head.uuid, head.ctransid); err != nil {
		return fmt.Errorf("mark the volume received: %w", errnoKind(err))
	}
	if err := setReadOnly(int(root.Fd()), true); err != nil {
		return fmt.Errorf("make the volume read-only: %w", errnoKind(err))
	}
	return nil
}
