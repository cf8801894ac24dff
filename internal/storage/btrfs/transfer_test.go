package btrfs

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/storage"
	"golang.org/x/sys/unix"
)

// TestExportImport exports a snapshot whole and the next one as a delta,
// imports both under other names (as another pool would), and checks the
// trees; then failed imports (a verify that refuses, a hostile stream, a
// delta onto the wrong base) leave no volume.
func TestExportImport(t *testing.T) {
	ctx, s, live := archivePool(t)
	fillTree(t, live, 100)
	must(t, os.Symlink("d1/f1", filepath.Join(live, "link")))
	mustSnapshot(t, s, sandboxKey("live"), snapshotKey("t1"), true)
	must(t, os.WriteFile(filepath.Join(live, "d1", "f1"), []byte("rewritten"), 0o640))
	must(t, os.RemoveAll(filepath.Join(live, "d2")))
	must(t, os.WriteFile(filepath.Join(live, "big"), bytes.Repeat([]byte("x"), 3<<20), 0o600))
	mustSnapshot(t, s, sandboxKey("live"), snapshotKey("t2"), true)

	var full, delta bytes.Buffer
	must(t, s.Export(ctx, snapshotKey("t1"), storage.Key{}, &full))
	must(t, s.Export(ctx, snapshotKey("t2"), snapshotKey("t1"), &delta))
	t.Logf("whole %d bytes, delta %d bytes", full.Len(), delta.Len())

	verified := 0
	verify := func() error { verified++; return nil }
	must(t, s.Import(ctx, bytes.NewReader(full.Bytes()), storage.Key{}, snapshotKey("i1"), verify))
	must(t, s.Import(ctx, bytes.NewReader(delta.Bytes()), snapshotKey("i1"), snapshotKey("i2"), verify))
	if verified != 2 {
		t.Errorf("verify ran %d times, want 2", verified)
	}
	assertSameTree(t, s.Path(snapshotKey("t1")), s.Path(snapshotKey("i1")))
	assertSameTree(t, s.Path(snapshotKey("t2")), s.Path(snapshotKey("i2")))
	if info, err := s.Stat(ctx, snapshotKey("i2")); err != nil || !info.ReadOnly {
		t.Errorf("imported volume: %+v, %v; want read-only", info, err)
	}
	if err := s.Import(ctx, bytes.NewReader(full.Bytes()), storage.Key{}, snapshotKey("i1"), nil); !errdefs.IsAlreadyExists(err) {
		t.Errorf("import over an existing volume: %v", err)
	}

	bad := errors.New("checksum refused")
	for name, tc := range map[string]struct {
		stream []byte
		base   storage.Key
		verify func() error
	}{
		"verify refuses":  {full.Bytes(), storage.Key{}, func() error { return bad }},
		"delta, no base":  {delta.Bytes(), storage.Key{}, nil},
		"delta, bad base": {delta.Bytes(), snapshotKey("t2"), nil},
		"whole onto base": {full.Bytes(), snapshotKey("i1"), nil},
		"cut short":       {full.Bytes()[:full.Len()/2], storage.Key{}, nil},
		"out of volume": {encodeStream(
			streamCmdSpec{cmdSubvol, []streamAttrSpec{{attrPath, []byte("x")}, {attrUUID, bytes.Repeat([]byte{3}, 16)}, {attrCtransid, u64le(1)}}},
			streamCmdSpec{cmdMkfile, []streamAttrSpec{{attrPath, []byte("../escaped")}}},
		), storage.Key{}, nil},
	} {
		err := s.Import(ctx, bytes.NewReader(tc.stream), tc.base, snapshotKey("bad"), tc.verify)
		if err == nil {
			t.Errorf("%s: imported", name)
			continue
		}
		t.Logf("%s: %v", name, err)
		for _, k := range []storage.Key{snapshotKey("bad"), snapshotKey("importing-bad")} {
			if _, err := s.Stat(ctx, k); err == nil {
				t.Errorf("%s: %s left behind", name, k)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(s.Path(snapshotKey("t1")), "..", "escaped")); err == nil {
		t.Error("a file was made outside the volume")
	}
}

// slowWriter takes in 50 MB/s, so the send fills its pipe and waits there.
type slowWriter struct {
	n int64
}

func (w *slowWriter) Write(p []byte) (int, error) {
	time.Sleep(time.Duration(len(p)) * 20 * time.Nanosecond)
	w.n += int64(len(p))
	return len(p), nil
}

// TestExportUnderSignals exports while every thread of the process is sent
// signals over and over (as the CPU profiler and Go's preemption do): the
// stream must come out once, the size of an undisturbed export, and not
// start again each time the send is interrupted on its full pipe.
func TestExportUnderSignals(t *testing.T) {
	ctx, s, live := archivePool(t)
	chunk := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	for i := range 16 {
		must(t, os.WriteFile(filepath.Join(live, fmt.Sprint(i)), chunk, 0o644))
	}
	mustSnapshot(t, s, sandboxKey("live"), snapshotKey("t1"), true)
	var quiet slowWriter
	must(t, s.Export(ctx, snapshotKey("t1"), storage.Key{}, &quiet))

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Microsecond):
			}
			tasks, _ := os.ReadDir("/proc/self/task")
			for _, task := range tasks {
				if tid, err := strconv.Atoi(task.Name()); err == nil {
					_ = unix.Tgkill(os.Getpid(), tid, unix.SIGURG)
				}
			}
		}
	})
	noisy := &slowWriter{}
	capped := &cappedWriter{w: noisy, left: 2 * quiet.n}
	err := s.Export(ctx, snapshotKey("t1"), storage.Key{}, capped)
	close(stop)
	wg.Wait()
	must(t, err)
	if noisy.n != quiet.n {
		t.Errorf("export under signals wrote %d bytes, undisturbed %d", noisy.n, quiet.n)
	}
}

// cachedPages is how many of f's pages are in the page cache.
func cachedPages(t *testing.T, p string) uint64 {
	t.Helper()
	f, err := os.Open(p)
	must(t, err)
	defer f.Close()
	var cs unix.Cachestat_t
	must(t, unix.Cachestat(uint(f.Fd()), &unix.CachestatRange{}, &cs, 0))
	return cs.Cache
}

// TestExportPrefetchLeavesCache exports a volume whose files were not in
// the page cache, but one: the prefetcher reads them ahead of the send and
// drops them again, and leaves the one that was cached alone.
func TestExportPrefetchLeavesCache(t *testing.T) {
	ctx, s, live := archivePool(t)
	chunk := make([]byte, 4<<20)
	for i := range 24 {
		rand.Read(chunk)
		must(t, os.WriteFile(filepath.Join(live, fmt.Sprint(i)), chunk, 0o644))
	}
	snap := mustSnapshot(t, s, sandboxKey("live"), snapshotKey("t1"), true)
	unix.Sync()
	dropPages(t, snap)
	hot := filepath.Join(snap, "7")
	_, err := os.ReadFile(hot)
	must(t, err)
	var out bytes.Buffer
	must(t, s.Export(ctx, snapshotKey("t1"), storage.Key{}, &out))
	if out.Len() < 24*len(chunk) {
		t.Fatalf("export of %d bytes", out.Len())
	}
	for i := range 24 {
		p := filepath.Join(snap, fmt.Sprint(i))
		n := cachedPages(t, p)
		switch {
		case p == hot && n != uint64(len(chunk)/os.Getpagesize()):
			t.Errorf("the cached file has %d pages left in the cache", n)
		case p != hot && n != 0:
			t.Errorf("file %d keeps %d pages in the cache", i, n)
		}
	}
	must(t, s.Import(ctx, &out, storage.Key{}, snapshotKey("i1"), nil))
	assertSameTree(t, snap, s.Path(snapshotKey("i1")))
}
