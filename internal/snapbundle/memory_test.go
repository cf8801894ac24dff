package snapbundle

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"strings"
	"testing"

	"github.com/warrenhq/warren/internal/errdefs"
)

func memoryHeader() Header {
	return Header{Format: FormatBtrfs, Snapshot: Record{ID: "snap1", Template: "base"},
		Memory: &Memory{Format: FormatTar, Bytes: 123, Runtime: "gvisor"}}
}

// memoryBundle writes a bundle of body and memory from offset on.
func memoryBundle(t *testing.T, body, memory []byte, offset int64) ([]byte, error) {
	t.Helper()
	var out bytes.Buffer
	w, err := NewWriterAt(&out, memoryHeader(), offset)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(body); err != nil {
		return nil, err
	}
	if err := w.BeginMemory(); err != nil {
		return nil, err
	}
	if _, err := w.Write(memory); err != nil {
		return nil, err
	}
	err = w.Close()
	return out.Bytes(), err
}

// readMemoryBundle reads a bundle through ReadAhead, as an import does,
// saving its memory section.
func readMemoryBundle(b []byte) (body, memory []byte, err error) {
	r, err := NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, nil, err
	}
	r.MemoryTo(func(m io.Reader) error {
		memory, err = io.ReadAll(m)
		return err
	})
	a := r.ReadAhead()
	defer a.Close()
	if body, err = io.ReadAll(a); err != nil {
		return body, nil, err
	}
	return body, memory, a.Verify()
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

func TestMemoryRoundTrip(t *testing.T) {
	for _, sizes := range [][2]int{{0, 0}, {10, 0}, {0, 10}, {frameSize + 3, 2*frameSize + 1}} {
		body, memory := randomBytes(sizes[0]), randomBytes(sizes[1])
		b, err := memoryBundle(t, body, memory, 0)
		if err != nil {
			t.Fatal(err)
		}
		gotBody, gotMemory, err := readMemoryBundle(b)
		if err != nil {
			t.Fatalf("sizes %v: %v", sizes, err)
		}
		if !bytes.Equal(gotBody, body) || !bytes.Equal(gotMemory, memory) {
			t.Fatalf("sizes %v: body %d/%d bytes, memory %d/%d bytes", sizes, len(gotBody), len(body), len(gotMemory), len(memory))
		}
		// A reader that does not ask for the memory checks and drops it.
		if _, got, err := readAll(b); err != nil || !bytes.Equal(got, body) {
			t.Fatalf("sizes %v: read without memory: %v", sizes, err)
		}
	}
}

// TestVersions: every bundle is written as version 4 (SHA-256 trailer);
// the CRC-32C versions 2 (files only) and 3 (memory) still read, and a
// version 2 header that claims memory, or a 3 that has none, is refused.
func TestVersions(t *testing.T) {
	if !bytes.Contains(bundle(t, []byte("x")), []byte(`"version":4`)) {
		t.Fatal("a bundle of files only is not version 4")
	}
	b, err := memoryBundle(t, []byte("x"), []byte("y"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"version":4`)) {
		t.Fatal("a bundle with memory is not version 4")
	}
	body := randomBytes(frameSize + 10)
	v2 := crcBundle(t, `{"version":2,"format":"tar","snapshot":{"id":"s"}}`, body)
	if _, got, err := readAll(v2); err != nil || !bytes.Equal(got, body) {
		t.Fatalf("version 2 bundle: %v", err)
	}
	bad := bytes.Clone(v2)
	bad[len(bad)-1] ^= 1
	if _, _, err := readAll(bad); err == nil || !strings.Contains(err.Error(), "CRC-32C") {
		t.Fatalf("version 2 with a bad CRC: %v", err)
	}
	for _, h := range []string{
		`{"version":2,"format":"tar","snapshot":{"id":"s"},"memory":{"format":"tar"}}`,
		`{"version":3,"format":"tar","snapshot":{"id":"s"}}`,
	} {
		if _, err := NewReader(bytes.NewReader(crcBundle(t, h, body))); err == nil || !errdefs.IsInvalid(err) {
			t.Fatalf("%s: %v", h, err)
		}
	}
}

// crcBundle is a bundle as versions 2 and 3 wrote it: header js, body in
// one end-framed section, a CRC-32C trailer.
func crcBundle(t *testing.T, js string, body []byte) []byte {
	t.Helper()
	var b []byte
	b = append(b, Magic...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(js)))
	b = append(b, js...)
	for len(body) > 0 {
		n := min(len(body), frameSize)
		b = binary.BigEndian.AppendUint32(b, uint32(n))
		b, body = append(b, body[:n]...), body[n:]
	}
	b = binary.BigEndian.AppendUint32(b, 0)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func TestMemoryDamageRefused(t *testing.T) {
	body, memory := randomBytes(frameSize/2), randomBytes(frameSize+100)
	good, err := memoryBundle(t, body, memory, 0)
	if err != nil {
		t.Fatal(err)
	}
	memStart := len(good) - sha256.Size - 4 - len(memory) - 8 // inside the memory section
	for _, at := range []int{memStart + 50, len(good) - 20} {
		bad := bytes.Clone(good)
		bad[at] ^= 0x40
		if _, _, err := readMemoryBundle(bad); err == nil || !errdefs.IsInvalid(err) {
			t.Errorf("byte %d flipped: %v, want invalid", at, err)
		}
	}
	for _, n := range []int{memStart + 10, len(good) - 9, len(good) - 5, len(good) - 1} {
		_, _, err := readMemoryBundle(good[:n])
		if err == nil || !errdefs.IsInvalid(err) || !strings.Contains(err.Error(), "truncated") {
			t.Errorf("cut at %d of %d: %v, want truncated", n, len(good), err)
		}
	}
	// The saver's own failure is the reader's.
	r, _ := NewReader(bytes.NewReader(good))
	boom := errors.New("disk full")
	r.MemoryTo(func(io.Reader) error { return boom })
	if err := r.Verify(); !errors.Is(err, boom) {
		t.Fatalf("saver failed: %v", err)
	}
}

func TestMemoryWriterMisuse(t *testing.T) {
	var out bytes.Buffer
	w, _ := NewWriter(&out, memoryHeader())
	if err := w.Close(); err == nil {
		t.Fatal("a bundle promising memory closed without it")
	}
	w, _ = NewWriter(&out, Header{Format: FormatTar, Snapshot: Record{ID: "s"}})
	if err := w.BeginMemory(); err == nil {
		t.Fatal("a memory section the header does not promise was begun")
	}
}

func TestMemoryResumeFromEveryCut(t *testing.T) {
	body, memory := randomBytes(2*frameSize+7), randomBytes(2*frameSize+9)
	full, err := memoryBundle(t, body, memory, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, cut := range []int64{100, frameSize, 2*frameSize + 40, 3*frameSize + 30, 4*frameSize + 60, int64(len(full)) - 6, int64(len(full)) - 2} {
		at, err := Boundary(bytes.NewReader(full[:cut]), cut)
		if err != nil || at > cut {
			t.Fatalf("cut %d: boundary %d, %v", cut, at, err)
		}
		rest, err := memoryBundle(t, body, memory, at)
		if err != nil {
			t.Fatalf("cut %d, resume at %d: %v", cut, at, err)
		}
		joined := append(bytes.Clone(full[:at]), rest...)
		if !bytes.Equal(joined, full) {
			t.Fatalf("cut %d, resume at %d: joined bundle differs", cut, at)
		}
	}
	withMem, noMem := memoryHeader(), memoryHeader()
	noMem.Memory = nil
	if Identity(withMem) == Identity(noMem) {
		t.Fatal("the identity does not tell a bundle with memory from one without")
	}
}
