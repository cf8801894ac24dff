package btrfs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/storage"
	"github.com/warrenhq/warren/internal/testutil"
)

// BenchmarkDiff100k: a 100,000-file tree (1 KiB files in 1,000
// directories), a snapshot, 25 files rewritten (~1 MB), another snapshot;
// then the diff of the two through the transid path and through a whole
// walk, and to the live volume (which costs a sync first). Reports each
// one's median as p50-ms.
//
//	go test -tags seccomp -run '^$' -bench Diff100k ./internal/storage/btrfs/
func BenchmarkDiff100k(b *testing.B) {
	testutil.RequireRoot(b)
	testutil.RequireBinary(b, "mkfs.btrfs")
	ctx := context.Background()
	s, err := Open(ctx, Options{DataDir: trackMounts(b.TempDir()), ImageSize: 4 << 30, Logger: testLogger(b)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := s.Unmount(); err != nil {
			b.Errorf("unmount pool: %v", err)
		}
	})
	live, err := s.Create(ctx, sandboxKey("live"))
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	small := make([]byte, 1024)
	for d := 0; d < 1000; d++ {
		dir := filepath.Join(live, fmt.Sprintf("d%03d", d/100), fmt.Sprintf("d%03d", d))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		for f := 0; f < 100; f++ {
			small[0] = byte(f)
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d", f)), small, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Logf("built 100,000 files in %v", time.Since(start))
	mustSnapshot(b, s, sandboxKey("live"), snapshotKey("a"), true)
	big := make([]byte, 40<<10)
	for i := 0; i < 25; i++ {
		d := i * 37
		p := filepath.Join(live, fmt.Sprintf("d%03d", d/100), fmt.Sprintf("d%03d", d), fmt.Sprintf("f%03d", i))
		big[0] = byte(i)
		if err := os.WriteFile(p, big, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	mustSnapshot(b, s, sandboxKey("live"), snapshotKey("b"), true)

	for _, tc := range []struct {
		name     string
		to       storage.Key
		walkOnly bool
		want     diffMethod
	}{
		{"transid", snapshotKey("b"), false, diffFast},
		{"transid-live", sandboxKey("live"), false, diffFast}, // syncs the pool first
		{"walk", snapshotKey("b"), true, diffWalkInodes},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var times []time.Duration
			for b.Loop() {
				t0 := time.Now()
				ch, method, err := s.diff(ctx, snapshotKey("a"), tc.to, tc.walkOnly)
				times = append(times, time.Since(t0))
				if err != nil {
					b.Fatal(err)
				}
				if method != tc.want || len(ch) != 25 {
					b.Fatalf("method %s with %d changes, want %s with 25", method, len(ch), tc.want)
				}
			}
			sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
			b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "p50-ms")
		})
	}
}
