package snapbundle

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/warrenhq/warren/internal/errdefs"
)

func bundle(t *testing.T, body []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	w, err := NewWriter(&out, Header{Format: FormatBtrfs, Base: "base1", Snapshot: Record{ID: "snap1", Template: "base", Turn: 3}})
	if err != nil {
		t.Fatal(err)
	}
	// Odd-sized writes, so frames and writes do not line up.
	for len(body) > 0 {
		k := min(len(body), 777_777)
		if _, err := w.Write(body[:k]); err != nil {
			t.Fatal(err)
		}
		body = body[k:]
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// readAll reads a bundle both straight and through ReadAhead, and fails
// when the two disagree.
func readAll(b []byte) (Header, []byte, error) {
	h, body, err := readDirect(b)
	_, ahead, aerr := readAhead(b)
	if (err == nil) != (aerr == nil) || !bytes.Equal(body, ahead) {
		return h, body, fmt.Errorf("read straight: %d bytes, %v; read ahead: %d bytes, %v", len(body), err, len(ahead), aerr)
	}
	return h, body, err
}

func readAhead(b []byte) (Header, []byte, error) {
	r, err := NewReader(bytes.NewReader(b))
	if err != nil {
		return Header{}, nil, err
	}
	a := r.ReadAhead()
	defer a.Close()
	body, err := io.ReadAll(a)
	if err != nil {
		return r.Header, body, err
	}
	return r.Header, body, a.Verify()
}

// TestReadAheadClosedEarly stops a read ahead in the middle of the body:
// Close returns, with the goroutine ended.
func TestReadAheadClosedEarly(t *testing.T) {
	body := make([]byte, 10*aheadChunk)
	rand.Read(body)
	r, err := NewReader(bytes.NewReader(bundle(t, body)))
	if err != nil {
		t.Fatal(err)
	}
	a := r.ReadAhead()
	if _, err := io.ReadFull(a, make([]byte, aheadChunk+7)); err != nil {
		t.Fatal(err)
	}
	a.Close()
	a.Close()
	select {
	case <-a.done:
	default:
		t.Fatal("the read-ahead goroutine is still running after Close")
	}
}

func readDirect(b []byte) (Header, []byte, error) {
	r, err := NewReader(bytes.NewReader(b))
	if err != nil {
		return Header{}, nil, err
	}
	body, err := io.ReadAll(r)
	if err != nil {
		return r.Header, body, err
	}
	return r.Header, body, r.Verify()
}

func TestRoundTrip(t *testing.T) {
	for _, size := range []int{0, 1, frameSize - 1, frameSize, 3*frameSize + 12345} {
		body := make([]byte, size)
		rand.Read(body)
		h, got, err := readAll(bundle(t, body))
		if err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		if !bytes.Equal(got, body) {
			t.Fatalf("size %d: body differs", size)
		}
		if h.Version != Version || h.Format != FormatBtrfs || h.Base != "base1" || h.Snapshot.ID != "snap1" || h.Snapshot.Turn != 3 {
			t.Fatalf("header %+v", h)
		}
	}
}

func TestCorruptionRefused(t *testing.T) {
	body := make([]byte, 2*frameSize+5)
	rand.Read(body)
	good := bundle(t, body)
	// Every region: magic, header, a frame length, body bytes, trailer.
	for _, at := range []int{0, len(Magic) + 6, len(good) / 2, len(good) - 40, len(good) - 1} {
		bad := bytes.Clone(good)
		bad[at] ^= 0x20
		if _, _, err := readAll(bad); err == nil || !errdefs.IsInvalid(err) {
			t.Errorf("byte %d flipped: err %v, want invalid", at, err)
		}
	}
}

func TestTruncationRefused(t *testing.T) {
	body := make([]byte, frameSize+100)
	rand.Read(body)
	good := bundle(t, body)
	for _, n := range []int{0, 5, len(Magic) + 2, len(Magic) + 20, len(good) / 2, len(good) - 33, len(good) - 32, len(good) - 1} {
		_, _, err := readAll(good[:n])
		if err == nil || !errdefs.IsInvalid(err) {
			t.Errorf("cut at %d of %d: err %v, want invalid", n, len(good), err)
			continue
		}
		if n > len(Magic)+4 && !strings.Contains(err.Error(), "truncated") {
			t.Errorf("cut at %d: %v does not say truncated", n, err)
		}
	}
	if _, _, err := readAll(append(bytes.Clone(good), 'x')); err == nil {
		t.Error("bytes after the trailer accepted")
	}
}

func TestNewerVersionRefused(t *testing.T) {
	good := bundle(t, []byte("x"))
	bad := bytes.Replace(good, []byte(`"version":4`), []byte(`"version":9`), 1)
	_, err := NewReader(bytes.NewReader(bad))
	if err == nil || !errdefs.IsInvalid(err) || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("err %v, want a newer-version refusal", err)
	}
	old := bytes.Replace(good, []byte(`"version":4`), []byte(`"version":1`), 1)
	_, err = NewReader(bytes.NewReader(old))
	if err == nil || !errdefs.IsInvalid(err) || !strings.Contains(err.Error(), "export the snapshot again") {
		t.Fatalf("err %v, want version 1 refused with what to do", err)
	}
}
