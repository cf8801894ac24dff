package btrfs

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"testing"
	"testing/iotest"
)

// writeSizes records the size of every write.
type writeSizes struct {
	bytes.Buffer
	sizes []int
}

func (w *writeSizes) Write(p []byte) (int, error) {
	w.sizes = append(w.sizes, len(p))
	return w.Buffer.Write(p)
}

func TestCopyWholeFillsWrites(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789"), 1000) // 10,000 bytes
	var w writeSizes
	// One byte a read: writes must still be whole buffers.
	if err := copyWhole(&w, iotest.OneByteReader(bytes.NewReader(data)), make([]byte, 4096)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(w.Bytes(), data) {
		t.Fatal("copied bytes differ")
	}
	if want := []int{4096, 4096, 1808}; !slices.Equal(w.sizes, want) {
		t.Fatalf("writes of %v, want %v", w.sizes, want)
	}
	broken := errors.New("broken pipe")
	w = writeSizes{}
	err := copyWhole(&w, io.MultiReader(bytes.NewReader(data[:100]), iotest.ErrReader(broken)), make([]byte, 4096))
	if !errors.Is(err, broken) || w.Len() != 100 {
		t.Fatalf("error %v after %d bytes, want %v after 100", err, w.Len(), broken)
	}
}
