// Package snapbundle is the stream a snapshot travels in from one warren
// daemon to another (GET /snapshots/{id}/export, POST /snapshots/import).
//
// A bundle is, in order:
//
//	magic    "warren-snapshot\x00" (16 bytes)
//	header   u32 big-endian length, then that much JSON (Header)
//	body     frames: u32 big-endian length (1..MaxFrame), then the bytes;
//	         a frame of length 0 ends the body
//	memory   only when the header has Memory: the snapshot's memory
//	         image, a tar of its directory, framed as the body is and
//	         ended the same way
//	trailer  the SHA-256 of every byte before it (32 bytes; versions 2
//	         and 3, which a reader still takes, had a big-endian CRC-32C,
//	         4 bytes)
//
// The body is the storage's own stream of the snapshot's files: a btrfs
// send stream (incremental against Header.Base when it names one) or a tar.
// It is framed because neither says where it ends before it has been read
// through, and the trailer must be found without parsing the body. A reader
// refuses a bundle whose trailer is missing (truncated) or wrong (corrupt)
// only once it has read the body, so an importer keeps what it builds
// invisible until Verify has passed.
//
// The trailer is a SHA-256 (version 4): a bundle kept on disk or passed
// through other hands names its content with a digest that can be
// compared with one published beside it, which a CRC cannot do. It is
// unkeyed: it proves the content is the one digested, not who made it.
// Versions 2 and 3 had a CRC-32C for speed (~0.7 GB/s for SHA-256 with the
// Go of the time); with the SHA extensions it now runs at ~1.4 GB/s on one
// core of the 2-core machines warren is measured on (CRC-32C ~14 GB/s),
// and an importer hashes in a goroutine of its own (ahead.go), beside the
// storage's write.
package snapbundle

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
)

// Magic opens every bundle.
const Magic = "warren-snapshot\x00"

// Version is the format a writer puts: a SHA-256 trailer, a memory
// section when the header has Memory. A reader also takes the CRC-32C
// versions before it: VersionCRC (files only) and VersionMemory (with a
// memory section), from daemons not yet upgraded. A daemon that knows only
// those refuses a version 4 bundle as newer instead of misreading it.
// Version 1, with a SHA-256 trailer, was never used outside tests.
const (
	Version       = 4
	VersionCRC    = 2
	VersionMemory = 3
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Body formats.
const (
	FormatBtrfs = "btrfs-send-v1"
	FormatTar   = "tar"
)

// Limits a reader enforces on what it is given.
const (
	MaxHeader = 1 << 20
	MaxFrame  = 4 << 20
	frameSize = 1 << 20 // what a writer puts in a frame
)

// Header describes the snapshot a bundle carries.
type Header struct {
	Version int    `json:"version"`
	Format  string `json:"format"`
	// Base is the snapshot the body is a delta against; "" for a full
	// bundle. The importer must hold it under the same id.
	Base     string `json:"base,omitempty"`
	Snapshot Record `json:"snapshot"`
	// MemoryLeftOut says the snapshot had an image of its memory which
	// this bundle does not carry: the import has its files only.
	MemoryLeftOut bool `json:"memoryLeftOut,omitempty"`
	// Memory describes the memory image the bundle carries after its
	// files (nil: none).
	Memory *Memory `json:"memory,omitempty"`
}

// Memory describes a bundle's memory section.
type Memory struct {
	Format string `json:"format"` // FormatTar
	// Bytes is the image's size on disk (the section is a little more).
	Bytes int64 `json:"bytes"`
	// Runtime is the runtime that saved it, the only one that can
	// restore it ("gvisor").
	Runtime string `json:"runtime"`
}

// versionOf is the format version a bundle of hdr is written in.
func versionOf(Header) int { return Version }

// newDigest is the trailer's digest of a bundle of version v, and its name.
func newDigest(v int) (hash.Hash, string) {
	if v == VersionCRC || v == VersionMemory {
		return crc32.New(castagnoli), "CRC-32C"
	}
	return sha256.New(), "SHA-256"
}

// Record is the snapshot's record as the exporting daemon holds it.
type Record struct {
	ID        string `json:"id"`
	SandboxID string `json:"sandboxID"`
	Family    string `json:"family"`
	Name      string `json:"name,omitempty"`
	Kind      string `json:"kind"`
	Turn      int    `json:"turn,omitempty"`
	ParentID  string `json:"parentID,omitempty"`
	// Lineage is the parent chain, nearest first, as far as the exporter
	// knows it (the template is at its end, in Template).
	Lineage         []string          `json:"lineage,omitempty"`
	Template        string            `json:"template"`
	Runtime         string            `json:"runtime,omitempty"`
	Labels          map[string]string `json:"labels,omitempty"`
	ExclusiveBytes  int64             `json:"exclusiveBytes"`
	ReferencedBytes int64             `json:"referencedBytes"`
	CreatedAt       time.Time         `json:"createdAt"`
}

// Writer writes one bundle: NewWriter writes the magic and the header,
// Write the body, Close the end of the body and the trailer. A bundle
// whose Close is not reached reads as truncated.
type Writer struct {
	w   io.Writer
	sum hash.Hash
	buf []byte
	err error
	// memory: the header promises a memory section; inMemory: the body
	// has ended and the memory section is being written.
	memory, inMemory bool
	// skip: the bundle's first skip bytes are digested but not written
	// (NewWriterAt); pos counts what has been made.
	skip, pos int64
}

// NewWriter writes the start of a bundle with hdr (its Version is set).
func NewWriter(w io.Writer, hdr Header) (*Writer, error) {
	return newWriter(w, hdr, 0)
}

func newWriter(w io.Writer, hdr Header, skip int64) (*Writer, error) {
	hdr.Version = versionOf(hdr)
	js, err := json.Marshal(hdr)
	if err != nil {
		return nil, fmt.Errorf("encode bundle header: %w", err)
	}
	if len(js) > MaxHeader {
		return nil, fmt.Errorf("bundle header is %d bytes, over %d: %w", len(js), MaxHeader, errdefs.ErrInvalid)
	}
	sum, _ := newDigest(hdr.Version)
	bw := &Writer{w: w, sum: sum, buf: make([]byte, 0, frameSize), skip: skip, memory: hdr.Memory != nil}
	start := make([]byte, 0, len(Magic)+4+len(js))
	start = append(start, Magic...)
	start = binary.BigEndian.AppendUint32(start, uint32(len(js)))
	start = append(start, js...)
	if err := bw.out(start); err != nil {
		return nil, err
	}
	return bw, nil
}

// out writes pieces, which end on a frame boundary, to the digest and to
// the destination (unless they lie before the offset being resumed from).
func (w *Writer) out(pieces ...[]byte) error {
	if w.err != nil {
		return w.err
	}
	var n int64
	for _, b := range pieces {
		w.sum.Write(b)
		n += int64(len(b))
	}
	at := w.pos
	w.pos += n
	switch {
	case w.pos <= w.skip:
		return nil
	case at < w.skip:
		w.err = errOffset(w.skip, at, w.pos)
		return w.err
	}
	for _, b := range pieces {
		if _, err := w.w.Write(b); err != nil {
			w.err = err
			break
		}
	}
	return w.err
}

// Write adds p to the body.
func (w *Writer) Write(p []byte) (int, error) {
	n := 0
	// Whole frames of p go out from p itself: an export hands over 1 MiB
	// reads of its pipe, and copying each into buf first was a third copy
	// of every byte on the sending side.
	for len(w.buf) == 0 && len(p) >= frameSize {
		if err := w.frame(p[:frameSize]); err != nil {
			return n, err
		}
		p, n = p[frameSize:], n+frameSize
	}
	for len(p) > 0 {
		k := min(len(p), frameSize-len(w.buf))
		w.buf = append(w.buf, p[:k]...)
		p, n = p[k:], n+k
		if len(w.buf) == frameSize {
			if err := w.flush(); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

func (w *Writer) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	err := w.frame(w.buf)
	w.buf = w.buf[:0]
	return err
}

// frame writes data as one frame.
func (w *Writer) frame(data []byte) error {
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(data)))
	return w.out(hdr[:], data)
}

// BeginMemory ends the body: what is written next is the memory section
// the header promised.
func (w *Writer) BeginMemory() error {
	if !w.memory || w.inMemory {
		return fmt.Errorf("snapshot bundle: a memory section the header does not promise, or a second one: %w", errdefs.ErrInvalid)
	}
	if err := w.endSection(); err != nil {
		return err
	}
	w.inMemory = true
	return nil
}

func (w *Writer) endSection() error {
	if err := w.flush(); err != nil {
		return err
	}
	return w.out([]byte{0, 0, 0, 0})
}

// Close ends the body (or the memory section) and writes the trailer. It
// does not close the destination.
func (w *Writer) Close() error {
	if w.memory && !w.inMemory {
		w.err = fmt.Errorf("snapshot bundle: the header promises a memory section that was not written: %w", errdefs.ErrInvalid)
		return w.err
	}
	if err := w.endSection(); err != nil {
		return err
	}
	if w.pos < w.skip {
		w.err = fmt.Errorf("offset %d is past the bundle's body (%d bytes): %w", w.skip, w.pos, errdefs.ErrInvalid)
		return w.err
	}
	sum := w.sum.Sum(nil)
	if _, err := w.w.Write(sum); err != nil {
		w.err = err
		return err
	}
	return nil
}

// Reader reads one bundle: NewReader reads the header, Read the body (io.EOF
// at its end), Verify the trailer.
type Reader struct {
	Header Header

	r   io.Reader
	sum hash.Hash
	// digest names sum in errors ("SHA-256").
	digest string
	left   int  // bytes left in the current frame
	end    bool // the current section's end frame has been read
	// inMemory: the body has ended and the memory section is being read.
	inMemory bool
	// memoryTo, if set, is given the memory section by Verify.
	memoryTo func(io.Reader) error
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("snapshot bundle: "+format+": %w", append(args, errdefs.ErrInvalid)...)
}

// truncated words a short read.
func truncated(what string, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return invalid("truncated in the %s (the transfer was cut short; export it again)", what)
	}
	return fmt.Errorf("snapshot bundle: read the %s: %w", what, err)
}

// NewReader reads a bundle's magic and header.
func NewReader(r io.Reader) (*Reader, error) {
	// The digest is the header's version's: the bytes up to the header's
	// end are read, then digested once it is known.
	br := &Reader{r: r}
	var start [len(Magic) + 4]byte
	if _, err := io.ReadFull(r, start[:]); err != nil {
		return nil, truncated("header", err)
	}
	if string(start[:len(Magic)]) != Magic {
		return nil, invalid("not a warren snapshot bundle (no %q at its start)", Magic[:len(Magic)-1])
	}
	n := binary.BigEndian.Uint32(start[len(Magic):])
	if n == 0 || n > MaxHeader {
		return nil, invalid("header of %d bytes (want 1..%d)", n, MaxHeader)
	}
	js := make([]byte, n)
	if _, err := io.ReadFull(r, js); err != nil {
		return nil, truncated("header", err)
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	if err := dec.Decode(&br.Header); err != nil {
		return nil, invalid("header is not JSON: %v", err)
	}
	if err := checkVersion(br.Header); err != nil {
		return nil, err
	}
	br.sum, br.digest = newDigest(br.Header.Version)
	br.sum.Write(start[:])
	br.sum.Write(js)
	return br, nil
}

// checkVersion accepts the versions this package reads, with the sections
// their headers promise.
func checkVersion(h Header) error {
	switch v := h.Version; {
	case v == Version, v == VersionCRC && h.Memory == nil, v == VersionMemory && h.Memory != nil:
		if h.Memory != nil && h.Memory.Format != FormatTar {
			return invalid("memory section in format %q (this daemon reads %q)", h.Memory.Format, FormatTar)
		}
		return nil
	case v == VersionCRC || v == VersionMemory:
		return invalid("format version %d with a memory section that does not match it", v)
	case v > Version:
		return invalid("format version %d is newer than this daemon reads (%d); upgrade warren here", v, Version)
	case v == 1:
		return invalid("format version 1 (SHA-256 trailer) is no longer read; export the snapshot again from a daemon of this version")
	}
	return invalid("format version %d is unknown", h.Version)
}

// full reads exactly len(b) bytes into b and the digest.
func (r *Reader) full(b []byte) error {
	_, err := io.ReadFull(r.r, b)
	r.sum.Write(b)
	return err
}

// Read reads the body.
func (r *Reader) Read(p []byte) (int, error) {
	if r.inMemory {
		return 0, io.EOF
	}
	return r.readSection(p, "body")
}

// readSection reads the frames of the current section, named what.
func (r *Reader) readSection(p []byte, what string) (int, error) {
	for r.left == 0 {
		if r.end {
			return 0, io.EOF
		}
		var hdr [4]byte
		if err := r.full(hdr[:]); err != nil {
			return 0, truncated(what, err)
		}
		n := binary.BigEndian.Uint32(hdr[:])
		if n > MaxFrame {
			return 0, invalid("frame of %d bytes (at most %d)", n, MaxFrame)
		}
		r.left, r.end = int(n), n == 0
	}
	if len(p) > r.left {
		p = p[:r.left]
	}
	n, err := r.r.Read(p)
	r.sum.Write(p[:n])
	r.left -= n
	if err != nil && (r.left > 0 || !errors.Is(err, io.EOF)) {
		return n, truncated(what, err)
	}
	return n, nil
}

// MemoryTo has Verify give the memory section, once the body has been
// read, to save (which reads it through or returns an error); without it
// Verify reads the section to check it and drops it. A bundle without
// memory never calls save.
func (r *Reader) MemoryTo(save func(io.Reader) error) { r.memoryTo = save }

// memorySection reads the memory section: the body must have been read.
type memorySection struct{ r *Reader }

func (m memorySection) Read(p []byte) (int, error) { return m.r.readSection(p, "memory section") }

// readMemory reads the memory section into save (or drops it).
func (r *Reader) readMemory() error {
	if r.Header.Memory == nil || r.inMemory {
		return nil
	}
	r.inMemory, r.end, r.left = true, false, 0
	sec := memorySection{r}
	if r.memoryTo != nil {
		if err := r.memoryTo(sec); err != nil {
			return err
		}
	}
	_, err := io.Copy(io.Discard, sec)
	return err
}

// Verify reads what is left of the body and the memory section (see
// MemoryTo), then checks the trailer against everything before it and
// that nothing follows it.
func (r *Reader) Verify() error {
	if _, err := io.Copy(io.Discard, r); err != nil {
		return err
	}
	if err := r.readMemory(); err != nil {
		return err
	}
	want := r.sum.Sum(nil)
	got := make([]byte, len(want))
	if _, err := io.ReadFull(r.r, got); err != nil {
		return truncated("trailer", err)
	}
	if !bytes.Equal(got, want) {
		return invalid("%s %x does not match the content's %x: the bundle was altered or damaged on the way", r.digest, got, want)
	}
	var one [1]byte
	if n, _ := io.ReadFull(r.r, one[:]); n > 0 {
		return invalid("bytes follow the trailer")
	}
	return nil
}
