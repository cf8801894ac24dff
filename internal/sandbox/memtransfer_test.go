package sandbox

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/warrenhq/warren/internal/errdefs"
)

func writeImage(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMemoryImageTransfer: an image sent and received comes out the same,
// the stream is the same each time it is made (a resumed transfer makes
// it again), and a received image becomes a snapshot's only when placed.
func TestMemoryImageTransfer(t *testing.T) {
	ctx := context.Background()
	src := &memoryImages{dir: memoryDir(t.TempDir()), log: slog.Default()}
	files := map[string]string{"checkpoint.img": "kernel", "pages.img": string(bytes.Repeat([]byte{7}, 1<<20)), "sub/x": "y", runtimeFile: "gvisor\n"}
	writeImage(t, src.dir.snapshotImage("snap1"), files)
	var a, b bytes.Buffer
	if err := src.WriteMemoryImage(ctx, "snap1", &a); err != nil {
		t.Fatal(err)
	}
	if err := src.WriteMemoryImage(ctx, "snap1", &b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("two streams of one image differ")
	}
	dst := &memoryImages{dir: memoryDir(t.TempDir()), log: slog.Default()}
	st, err := dst.ReceiveMemoryImage(bytes.NewReader(a.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := dst.MemoryImage("snap2"); ok {
		t.Fatal("a received image is a snapshot's before it is placed")
	}
	if err := st.Place("snap2"); err != nil {
		t.Fatal(err)
	}
	st.Drop() // after Place: nothing
	for name, body := range files {
		got, err := os.ReadFile(filepath.Join(dst.dir.snapshotImage("snap2"), name))
		if err != nil || string(got) != body {
			t.Fatalf("%s: %d bytes, %v", name, len(got), err)
		}
	}
	if rt, ok := dst.MemoryImage("snap2"); !ok || rt != "gvisor" {
		t.Fatalf("placed image: %q %v", rt, ok)
	}
	// A hibernation image put in place from it, and one kept from a
	// hibernation as a snapshot's.
	if err := dst.dir.putHibernationImage("snap2", "sb1"); err != nil || !dst.IsHibernated("sb1") {
		t.Fatalf("put the hibernation image: %v", err)
	}
	n, err := dst.KeepHibernationAsSnapshot("sb1", "snap3", "gvisor")
	if err != nil || n < 1<<20 {
		t.Fatalf("keep the hibernation image: %d, %v", n, err)
	}
	if rt, ok := dst.MemoryImage("snap3"); !ok || rt != "gvisor" {
		t.Fatalf("kept image: %q %v", rt, ok)
	}
}

// TestMemoryImageReceiveRefusesBadTars: names outside the image, links,
// and a cut stream are refused and leave nothing.
func TestMemoryImageReceiveRefusesBadTars(t *testing.T) {
	m := &memoryImages{dir: memoryDir(t.TempDir()), log: slog.Default()}
	mk := func(hdr tar.Header, body string) []byte {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		hdr.Size = int64(len(body))
		if err := tw.WriteHeader(&hdr); err != nil {
			t.Fatal(err)
		}
		io.WriteString(tw, body)
		tw.Close()
		return buf.Bytes()
	}
	good := mk(tar.Header{Name: "pages.img", Typeflag: tar.TypeReg, Mode: 0o600}, "0123456789")
	for name, b := range map[string][]byte{
		"escape":  mk(tar.Header{Name: "../evil", Typeflag: tar.TypeReg, Mode: 0o600}, "x"),
		"symlink": mk(tar.Header{Name: "l", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"}, ""),
		"cut":     good[:520],
	} {
		if _, err := m.ReceiveMemoryImage(bytes.NewReader(b)); err == nil || (name != "cut" && !errdefs.IsInvalid(err)) {
			t.Errorf("%s: %v, want refused", name, err)
		}
	}
	entries, _ := os.ReadDir(string(m.dir))
	if len(entries) != 0 {
		t.Fatalf("refused images left %d entries", len(entries))
	}
}
