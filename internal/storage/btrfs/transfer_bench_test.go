package btrfs

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"testing"
	"time"

	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/snapbundle"
	"github.com/warrenhq/warren/internal/storage"
)

// TestExportRate measures, a few rounds interleaved, on a loop-backed pool
// with WARREN_MEASURE_MB (default 1024) of files: an O_DIRECT read of the
// snapshot's files (the disk's sequential read rate), `btrfs send` of it to
// /dev/null, warren's export to /dev/null (bare and in a bundle), each with
// the files' pages dropped first (posix_fadvise on those files only: other
// work on the host keeps its cache), and an import of the bundle. Set
// WARREN_MEASURE_TRANSFER=1 to run it; WARREN_MEASURE_PROFILE=dir writes CPU
// profiles of the export and import there.
func TestExportRate(t *testing.T) {
	if os.Getenv("WARREN_MEASURE_TRANSFER") == "" {
		t.Skip("set WARREN_MEASURE_TRANSFER=1 to measure")
	}
	mb := 1024
	if v, err := strconv.Atoi(os.Getenv("WARREN_MEASURE_MB")); err == nil {
		mb = v
	}
	ctx := context.Background()
	s, err := Open(ctx, Options{DataDir: trackMounts(t.TempDir()), ImageSize: 3*int64(mb)<<20 + 1<<30, Logger: testLogger(t)})
	must(t, err)
	t.Cleanup(func() { must(t, s.Unmount()) })
	live, err := s.Create(ctx, sandboxKey("live"))
	must(t, err)
	must(t, os.MkdirAll(filepath.Join(live, "big"), 0o755))
	chunk := make([]byte, 64<<20)
	for i := 0; i < mb; i += 64 {
		rand.Read(chunk)
		must(t, os.WriteFile(filepath.Join(live, "big", fmt.Sprint(i)), chunk[:min(64, mb-i)<<20], 0o644))
	}
	mustSnapshot(t, s, sandboxKey("live"), snapshotKey("big"), true)
	unix.Sync()
	snap := s.Path(snapshotKey("big"))
	bytesOf := float64(mb) * (1 << 20)
	rate := func(d time.Duration) string {
		return fmt.Sprintf("%4.0f MB/s (%v)", bytesOf/d.Seconds()/1e6, d.Round(time.Millisecond))
	}
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	must(t, err)
	defer devnull.Close()
	bundle := filepath.Join(t.TempDir(), "bundle")
	profile := func(name string, f func()) {
		dir := os.Getenv("WARREN_MEASURE_PROFILE")
		if dir == "" {
			f()
			return
		}
		out, err := os.Create(filepath.Join(dir, name+".pprof"))
		must(t, err)
		must(t, pprof.StartCPUProfile(out))
		f()
		pprof.StopCPUProfile()
		out.Close()
	}
	for round := range 3 {
		load, _ := os.ReadFile("/proc/loadavg")
		t.Logf("round %d, load %s", round, load[:14])
		start := time.Now()
		directRead(t, snap)
		t.Logf("  O_DIRECT read          %s", rate(time.Since(start)))
		dropPages(t, snap)
		start = time.Now()
		cmd := exec.Command("btrfs", "send", "-q", snap)
		cmd.Stdout = devnull
		must(t, cmd.Run())
		t.Logf("  btrfs send cold        %s", rate(time.Since(start)))
		dropPages(t, snap)
		start = time.Now()
		must(t, s.Export(ctx, snapshotKey("big"), storage.Key{}, &cappedWriter{w: devnull, left: 2 * int64(bytesOf)}))
		t.Logf("  export cold            %s", rate(time.Since(start)))
		dropPages(t, snap)
		f, err := os.Create(bundle)
		must(t, err)
		out := &cappedWriter{w: f, left: 2 * int64(bytesOf)}
		start = time.Now()
		profile(fmt.Sprint("export", round), func() {
			bw, err := snapbundle.NewWriter(out, snapbundle.Header{Format: snapbundle.FormatBtrfs})
			must(t, err)
			must(t, s.Export(ctx, snapshotKey("big"), storage.Key{}, bw))
			must(t, bw.Close())
		})
		t.Logf("  bundle cold to a file  %s", rate(time.Since(start)))
		must(t, f.Close())
		in, err := os.Open(bundle)
		must(t, err)
		key := snapshotKey(fmt.Sprint("imported", round))
		start = time.Now()
		profile(fmt.Sprint("import", round), func() {
			br, err := snapbundle.NewReader(in)
			must(t, err)
			ahead := br.ReadAhead()
			defer ahead.Close()
			must(t, s.Import(ctx, ahead, storage.Key{}, key, ahead.Verify))
		})
		t.Logf("  import from the cache  %s", rate(time.Since(start)))
		in.Close()
		must(t, s.Delete(ctx, key))
	}
}

// directRead reads every regular file under root with O_DIRECT, one after
// another, 4 MiB at a time.
func directRead(t *testing.T, root string) {
	buf := alignedBuffer(4 << 20)
	must(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECT|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		for {
			n, err := unix.Read(fd, buf)
			if err != nil || n == 0 {
				return err
			}
		}
	}))
}

func alignedBuffer(n int) []byte {
	b := make([]byte, n+4096)
	off := 0
	if r := int(uintptr(unsafePointer(b)) % 4096); r != 0 {
		off = 4096 - r
	}
	return b[off : off+n]
}

// dropPages drops the page cache of the files under root (only theirs).
func dropPages(t *testing.T, root string) {
	must(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
	}))
}

// cappedWriter fails a write past left bytes: an export far larger than
// its files is a fault, not something to fill the disk with.
type cappedWriter struct {
	w    io.Writer
	left int64
}

func (c *cappedWriter) Write(p []byte) (int, error) {
	c.left -= int64(len(p))
	if c.left < 0 {
		return 0, fmt.Errorf("the stream ran past twice the size of its files")
	}
	return c.w.Write(p)
}

func unsafePointer(b []byte) unsafe.Pointer { return unsafe.Pointer(&b[0]) }
