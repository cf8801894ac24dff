package snapbundle

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
)

// A transfer cut short resumes where it stopped: the receiver keeps the
// bytes it got and asks the exporter for the rest from an offset. The
// exporter cannot seek in a send stream, so it makes the bundle again from
// its start and drops what lies before the offset (the digest still covers
// it, so the trailer is the whole bundle's). That is only the same bundle
// when the snapshot and the base are the same: Identity names them, and an
// exporter refuses an offset into a bundle of another identity.

// Identity names a bundle's content for a resume: the format, the base,
// the snapshot (id, sandbox, turn, time) and its memory image (size,
// runtime). Sizes and labels of the files, which change while a snapshot
// is held, are left out.
func Identity(h Header) string {
	s := h.Snapshot
	id := fmt.Sprintf("v%d\x00%s\x00%s\x00%s\x00%s\x00%d\x00%s",
		versionOf(h), h.Format, h.Base, s.ID, s.SandboxID, s.Turn, s.CreatedAt.UTC().Format(time.RFC3339Nano))
	if m := h.Memory; m != nil {
		id += fmt.Sprintf("\x00%s\x00%d\x00%s", m.Format, m.Bytes, m.Runtime)
	}
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:8])
}

// NewWriterAt is NewWriter for the part of a bundle from offset on: what
// lies before it is made and digested but not written. offset must be a
// frame boundary (the end of the header or of a frame, as Boundary finds
// them); Write or Close fail when it is not, or is past the bundle's end.
func NewWriterAt(w io.Writer, hdr Header, offset int64) (*Writer, error) {
	if offset < 0 {
		return nil, fmt.Errorf("offset %d is negative: %w", offset, errdefs.ErrInvalid)
	}
	return newWriter(w, hdr, offset)
}

// errOffset words an offset that does not fall on a frame boundary.
func errOffset(offset, at, end int64) error {
	return fmt.Errorf("offset %d is not on a frame boundary of this bundle (one lies at %d, the next at %d): %w", offset, at, end, errdefs.ErrInvalid)
}

// Boundary reads the bundle prefix r holds (size bytes of it) and returns
// the last frame boundary inside it: the offset to resume from, all of the
// prefix up to it being whole frames. It returns 0 when not even the
// header is whole.
func Boundary(r io.ReaderAt, size int64) (int64, error) {
	var lenBuf [4]byte
	if size < int64(len(Magic))+4 {
		return 0, nil
	}
	if _, err := r.ReadAt(lenBuf[:], int64(len(Magic))); err != nil {
		return 0, fmt.Errorf("read the bundle's header length: %w", err)
	}
	hdrLen := int64(binary.BigEndian.Uint32(lenBuf[:]))
	at := int64(len(Magic)) + 4 + hdrLen
	if at > size {
		return 0, nil
	}
	if hdrLen == 0 || hdrLen > MaxHeader {
		return 0, invalid("header of %d bytes (want 1..%d)", hdrLen, MaxHeader)
	}
	js := make([]byte, hdrLen)
	if _, err := r.ReadAt(js, int64(len(Magic))+4); err != nil {
		return 0, fmt.Errorf("read the bundle's header: %w", err)
	}
	var h Header
	if err := json.Unmarshal(js, &h); err != nil {
		return 0, invalid("header is not JSON: %v", err)
	}
	// The end frames still to come: the body's, and the memory section's.
	ends := 1
	if h.Memory != nil {
		ends = 2
	}
	for at+4 <= size {
		if _, err := r.ReadAt(lenBuf[:], at); err != nil {
			return 0, fmt.Errorf("read the frame length at %d: %w", at, err)
		}
		n := int64(binary.BigEndian.Uint32(lenBuf[:]))
		if n > MaxFrame {
			return 0, invalid("frame of %d bytes at offset %d (at most %d)", n, at, MaxFrame)
		}
		if at+4+n > size {
			break
		}
		at += 4 + n
		if n == 0 {
			if ends--; ends == 0 {
				break // the last end frame: only the trailer follows
			}
		}
	}
	return at, nil
}

// ParseOffset reads an offset query parameter ("" is 0).
func ParseOffset(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("offset %q is not a byte count: %w", s, errdefs.ErrInvalid)
	}
	return n, nil
}
