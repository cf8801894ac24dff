package native

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/runtime"
	"github.com/warrenhq/warren/internal/runtime/runtimetest"
)

func TestStatsOfBusySandbox(t *testing.T) {
	r := newTestRuntime(t)(t)
	rootfs := runtimetest.BusyboxRootfs(t)
	box := runtimetest.RunScript(t, r, rootfs, "(while :; do :; done) &", func(s *runtime.Spec) {
		s.Limits = runtime.Limits{MemoryBytes: 64 << 20, CPUMillis: 500, Pids: 100}
	})
	box.WaitDone(t, 10*time.Second)
	ctx := context.Background()
	first, err := r.Stats(ctx, box.Spec.ID)
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	time.Sleep(300 * time.Millisecond)
	second, err := r.Stats(ctx, box.Spec.ID)
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	t.Logf("first %+v\nsecond %+v", first, second)
	if second.CPUUsageNanos <= first.CPUUsageNanos {
		t.Errorf("CPU usage did not grow while a loop burns CPU: %d then %d", first.CPUUsageNanos, second.CPUUsageNanos)
	}
	// Half a CPU for 300 ms is ~150 ms of CPU time; allow for scheduling.
	if d := second.CPUUsageNanos - first.CPUUsageNanos; d < uint64(50*time.Millisecond) {
		t.Errorf("CPU used in 300 ms = %s, want more than 50ms", time.Duration(d))
	}
	if second.CPULimitMillis != 500 {
		t.Errorf("CPULimitMillis = %d, want 500", second.CPULimitMillis)
	}
	if second.MemoryBytes <= 0 || second.MemoryLimit != 64<<20 {
		t.Errorf("memory = %d of %d, want > 0 of %d", second.MemoryBytes, second.MemoryLimit, 64<<20)
	}
	if second.Pids < 2 || second.PidsLimit != 100 {
		t.Errorf("pids = %d of %d, want >= 2 of 100", second.Pids, second.PidsLimit)
	}
	if second.At.IsZero() {
		t.Error("At is zero")
	}

	if err := r.Destroy(ctx, box.Spec.ID); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	if _, err := r.Stats(ctx, box.Spec.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("Stats of a destroyed sandbox = %v, want ErrNotFound", err)
	}
}

// TestDirtyBytes: data a sandbox wrote and the kernel has not written back
// is counted against it, and is gone once written back.
func TestDirtyBytes(t *testing.T) {
	r := newTestRuntime(t)(t)
	rootfs := runtimetest.BusyboxRootfs(t)
	box := runtimetest.RunScript(t, r, rootfs, "head -c 16777216 /dev/zero > /unwritten.bin", nil)
	box.WaitDone(t, 10*time.Second)
	ctx := context.Background()
	dirty, err := r.DirtyBytes(ctx, box.Spec.ID)
	if err != nil {
		t.Fatalf("DirtyBytes: %v", err)
	}
	// The kernel may have started on it (dirty_expire, memory pressure):
	// most of 16 MiB is still not on disk a moment later.
	if dirty < 4<<20 {
		t.Errorf("dirty after writing 16 MiB = %d, want at least 4 MiB", dirty)
	}
	f, err := os.Open(rootfs)
	if err != nil {
		t.Fatal(err)
	}
	err = unix.Syncfs(int(f.Fd()))
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if after, err := r.DirtyBytes(ctx, box.Spec.ID); err != nil || after >= dirty/4 {
		t.Errorf("dirty after syncfs = %d (%v), was %d", after, err, dirty)
	}
	if err := r.Destroy(ctx, box.Spec.ID); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	if _, err := r.DirtyBytes(ctx, box.Spec.ID); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("DirtyBytes of a destroyed sandbox = %v, want ErrNotFound", err)
	}
}
