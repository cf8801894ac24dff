package snapbundle

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
)

// writeAt makes the bundle of body again from offset on.
func writeAt(t *testing.T, body []byte, offset int64) ([]byte, error) {
	t.Helper()
	var out bytes.Buffer
	w, err := NewWriterAt(&out, Header{Format: FormatBtrfs, Base: "base1", Snapshot: Record{ID: "snap1", Template: "base", Turn: 3}}, offset)
	if err != nil {
		return nil, err
	}
	for len(body) > 0 {
		k := min(len(body), 777_777)
		if _, err := w.Write(body[:k]); err != nil {
			return nil, err
		}
		body = body[k:]
	}
	err = w.Close()
	return out.Bytes(), err
}

func TestResumeFromEveryCut(t *testing.T) {
	body := make([]byte, 3*frameSize+12345)
	rand.Read(body)
	full := bundle(t, body)
	cuts := []int64{0, 10, int64(len(Magic)) + 4, int64(len(Magic)) + 40, 200, frameSize, frameSize + 300, 2*frameSize + 17, int64(len(full)) - 4, int64(len(full)) - 2}
	for _, cut := range cuts {
		at, err := Boundary(bytes.NewReader(full[:cut]), cut)
		if err != nil {
			t.Fatalf("cut %d: %v", cut, err)
		}
		if at > cut {
			t.Fatalf("cut %d: boundary %d past it", cut, at)
		}
		rest, err := writeAt(t, body, at)
		if err != nil {
			t.Fatalf("cut %d, resume at %d: %v", cut, at, err)
		}
		joined := append(append([]byte{}, full[:at]...), rest...)
		if !bytes.Equal(joined, full) {
			t.Fatalf("cut %d, resume at %d: the joined bundle differs from the whole one", cut, at)
		}
		if _, got, err := readAll(joined); err != nil || !bytes.Equal(got, body) {
			t.Fatalf("cut %d: read back: %v", cut, err)
		}
	}
}

func TestResumeRefusesBadOffsets(t *testing.T) {
	body := make([]byte, 2*frameSize)
	rand.Read(body)
	full := bundle(t, body)
	at, _ := Boundary(bytes.NewReader(full), int64(len(full)))
	if at != int64(len(full))-sha256.Size {
		t.Fatalf("boundary of a whole bundle is %d, want %d (before its trailer)", at, len(full)-sha256.Size)
	}
	for _, off := range []int64{3, frameSize + 100, int64(len(full)) + 10} {
		if _, err := writeAt(t, body, off); !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("offset %d: err %v, want ErrInvalid", off, err)
		}
	}
	if _, err := NewWriterAt(&bytes.Buffer{}, Header{}, -1); !errors.Is(err, errdefs.ErrInvalid) {
		t.Errorf("negative offset: err %v", err)
	}
}

func TestIdentity(t *testing.T) {
	at := time.Date(2026, 11, 27, 22, 0, 0, 0, time.UTC)
	h := Header{Format: FormatBtrfs, Snapshot: Record{ID: "s1", SandboxID: "sb", Turn: 2, CreatedAt: at, ExclusiveBytes: 1}}
	same := h
	same.Snapshot.ExclusiveBytes, same.Snapshot.Labels = 99, map[string]string{"a": "b"}
	if Identity(h) != Identity(same) {
		t.Error("sizes and labels changed the identity")
	}
	other := h
	other.Base = "s0"
	if Identity(h) == Identity(other) {
		t.Error("a delta has the identity of the whole bundle")
	}
	later := h
	later.Snapshot.CreatedAt = at.Add(time.Nanosecond)
	if Identity(h) == Identity(later) {
		t.Error("another snapshot of the same id has the same identity")
	}
}

func TestParseOffset(t *testing.T) {
	if n, err := ParseOffset(""); n != 0 || err != nil {
		t.Errorf("empty: %d %v", n, err)
	}
	if n, err := ParseOffset("4096"); n != 4096 || err != nil {
		t.Errorf("4096: %d %v", n, err)
	}
	for _, s := range []string{"-1", "x", "1e3"} {
		if _, err := ParseOffset(s); !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("%q: %v", s, err)
		}
	}
}
