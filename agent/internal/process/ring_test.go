package process

import (
	"bytes"
	"testing"
)

func TestRingKeepsNewestBytesAtAbsoluteOffsets(t *testing.T) {
	r := newRing(10)
	r.write([]byte("abcd"))
	if got, at := r.read(0, 100); string(got) != "abcd" || at != 0 {
		t.Fatalf("read = %q at %d", got, at)
	}
	r.write([]byte("efghijkl")) // 12 bytes written, 10 kept
	if r.start != 2 || r.end != 12 {
		t.Fatalf("start, end = %d, %d; want 2, 12", r.start, r.end)
	}
	if got, at := r.read(0, 100); string(got) != "cdefghijkl" || at != 2 {
		t.Fatalf("read from a dropped offset = %q at %d", got, at)
	}
	if got, at := r.read(5, 3); string(got) != "fgh" || at != 5 {
		t.Fatalf("read(5, 3) = %q at %d", got, at)
	}
	if got, at := r.read(12, 3); len(got) != 0 || at != 12 {
		t.Fatalf("read at end = %q at %d", got, at)
	}
	r.write([]byte("0123456789ABCDEF")) // larger than the ring
	if got, at := r.read(0, 100); string(got) != "6789ABCDEF" || at != 18 {
		t.Fatalf("after an oversized write: %q at %d", got, at)
	}
}

func TestRingMatchesAReference(t *testing.T) {
	r := newRing(1000)
	var all []byte
	for i := range 500 {
		p := bytes.Repeat([]byte{byte(i)}, i%37+1)
		r.write(p)
		all = append(all, p...)
		start := max(0, len(all)-1000)
		got, at := r.read(0, 1<<20)
		if at != uint64(start) || !bytes.Equal(got, all[start:]) {
			t.Fatalf("write %d: at %d (want %d), %d bytes differ", i, at, start, len(got))
		}
	}
}
