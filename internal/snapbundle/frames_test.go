package snapbundle

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// Whole frames written straight from the caller's slice make the same
// bundle as data gathered in the writer's buffer, whatever the sizes of
// the writes.
func TestWriteSizesMakeOneBundle(t *testing.T) {
	body := make([]byte, 3*frameSize+12345)
	_, _ = rand.NewChaCha8([32]byte{'f'}).Read(body)
	want := bundle(t, body) // odd-sized writes: every frame gathered
	for _, sizes := range [][]int{
		{frameSize},
		{3*frameSize + 12345},
		{10, frameSize, 2 * frameSize},
		{frameSize - 1, frameSize + 1},
		{frameSize, 1, 2*frameSize - 1, 12345},
	} {
		var out bytes.Buffer
		w, err := NewWriter(&out, Header{Format: FormatBtrfs, Base: "base1", Snapshot: Record{ID: "snap1", Template: "base", Turn: 3}})
		if err != nil {
			t.Fatal(err)
		}
		rest := body
		for i := 0; len(rest) > 0; i++ {
			k := min(len(rest), sizes[i%len(sizes)])
			if n, err := w.Write(rest[:k]); err != nil || n != k {
				t.Fatalf("writes of %v: wrote %d of %d: %v", sizes, n, k, err)
			}
			rest = rest[k:]
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out.Bytes(), want) {
			t.Fatalf("writes of %v made a different bundle", sizes)
		}
	}
	if _, got, err := readAll(want); err != nil || !bytes.Equal(got, body) {
		t.Fatalf("read back: %v (same body: %v)", err, bytes.Equal(got, body))
	}
}
