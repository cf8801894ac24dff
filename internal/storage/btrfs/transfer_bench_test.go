package btrfs

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/storage"
)

// TestExportRate measures a whole export of a volume with 200 MiB of
// files, read from the disk (caches dropped) and from the page cache, beside
// `btrfs send` of the same volume, and an import of it. Set
// WARREN_MEASURE_TRANSFER=1 to run it.
func TestExportRate(t *testing.T) {
	if os.Getenv("WARREN_MEASURE_TRANSFER") == "" {
		t.Skip("set WARREN_MEASURE_TRANSFER=1 to measure")
	}
	ctx, s, live := archivePool(t)
	must(t, os.MkdirAll(filepath.Join(live, "big"), 0o755))
	chunk := make([]byte, 1<<20)
	for i := range 200 {
		rand.Read(chunk)
		must(t, os.WriteFile(filepath.Join(live, "big", fmt.Sprint(i)), chunk, 0o644))
	}
	mustSnapshot(t, s, sandboxKey("live"), snapshotKey("big"), true)
	drop := func() {
		unix.Sync()
		must(t, os.WriteFile("/proc/sys/vm/drop_caches", []byte("1"), 0))
	}
	// The send drops from the page cache the pages it read in itself, so
	// a second send is as cold as the first: "warm" reads the files first.
	readAll := func() {
		for i := range 200 {
			_, err := os.ReadFile(filepath.Join(s.Path(snapshotKey("big")), "big", fmt.Sprint(i)))
			must(t, err)
		}
	}
	var buf bytes.Buffer
	for _, cold := range []bool{true, false} {
		drop()
		if !cold {
			readAll()
		}
		buf.Reset()
		start := time.Now()
		must(t, s.Export(ctx, snapshotKey("big"), storage.Key{}, &buf))
		d := time.Since(start)
		t.Logf("export cold=%v: %d bytes in %v = %.0f MB/s", cold, buf.Len(), d, float64(buf.Len())/d.Seconds()/1e6)
	}
	start := time.Now()
	must(t, s.Export(ctx, snapshotKey("big"), storage.Key{}, io.Discard))
	t.Logf("export warm to discard: %v", time.Since(start))
	src, err := s.volumes.openSubvol(snapshotKey("big"))
	must(t, err)
	out, err := os.Create(filepath.Join(t.TempDir(), "stream"))
	must(t, err)
	start = time.Now()
	must(t, sendDelta(int(src.Fd()), 0, out))
	t.Logf("send warm to a file: %v", time.Since(start))
	out.Close()
	src.Close()
	drop()
	start = time.Now()
	cmd := exec.Command("btrfs", "send", "-q", s.Path(snapshotKey("big")))
	cmd.Stdout = io.Discard
	if err := cmd.Run(); err != nil {
		t.Logf("btrfs send: %v", err)
	}
	t.Logf("btrfs send cold: %v", time.Since(start))
	drop()
	f, err := os.Open(filepath.Join(s.Path(snapshotKey("big")), "big"))
	must(t, err)
	f.Close()
	start = time.Now()
	n := 0
	for i := range 200 {
		b, err := os.ReadFile(filepath.Join(s.Path(snapshotKey("big")), "big", fmt.Sprint(i)))
		must(t, err)
		n += len(b)
	}
	t.Logf("read the files cold: %v = %.0f MB/s", time.Since(start), float64(n)/time.Since(start).Seconds()/1e6)
	start = time.Now()
	must(t, s.Import(ctx, bytes.NewReader(buf.Bytes()), storage.Key{}, snapshotKey("imported"), nil))
	t.Logf("import from memory: %v = %.0f MB/s", time.Since(start), float64(buf.Len())/time.Since(start).Seconds()/1e6)
}
