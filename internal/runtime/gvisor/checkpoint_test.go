package gvisor

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	rt "github.com/warrenhq/warren/internal/runtime"
	"github.com/warrenhq/warren/internal/runtime/runtimetest"
)

// counterScript counts in a shell variable, which lives only in the
// sandbox's memory, and writes each value to /results/count, followed by
// the sandbox's boot id.
const counterScript = `i=0
while :; do i=$((i+1)); echo "$i $(cat /proc/sys/kernel/random/boot_id)" > /results/count.tmp; mv /results/count.tmp /results/count; sleep 0.05; done`

// count reads the counter a box last wrote.
func count(t *testing.T, b *runtimetest.Box) int {
	t.Helper()
	n, _ := strconv.Atoi(strings.Fields(b.Read("count") + " 0")[0])
	return n
}

// bootID reads the boot id a box last wrote beside its counter.
func bootID(b *runtimetest.Box) string {
	f := strings.Fields(b.Read("count"))
	if len(f) < 2 {
		return ""
	}
	return f[1]
}

// waitCount waits until the box's counter reaches at least n.
func waitCount(t *testing.T, b *runtimetest.Box, n int) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if c := count(t, b); c >= n {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox %s: counter at %d, not %d, after 30s; log:\n%s", b.Spec.ID, count(t, b), n, b.ReadLog())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A checkpoint keeps the sandbox's processes with their memory: a sandbox
// checkpointed and stopped comes back counting on from where it was, and a
// second sandbox restored from a checkpoint over a copy of the files counts
// on from the checkpoint's value, independently.
func TestCheckpointRestore(t *testing.T) {
	r := newTestRuntime(t)(t)
	ctx := context.Background()
	rootfs := runtimetest.BusyboxRootfs(t)
	b := runtimetest.RunScript(t, r, rootfs, counterScript, nil)
	waitCount(t, b, 5)
	boot := bootID(b)

	// Checkpoint and carry on: the sandbox keeps counting.
	images := t.TempDir()
	live := filepath.Join(images, "live")
	// The counter the checkpoint holds is at least this (read before it)
	// and about atLive (read after it; a loaded machine widens the gap).
	beforeLive := count(t, b)
	info, err := r.Checkpoint(ctx, b.Spec.ID, live, false)
	if err != nil {
		t.Fatal(err)
	}
	atLive := count(t, b)
	t.Logf("checkpoint (left running): %d bytes in %s, counter %d", info.Bytes, info.Duration, atLive)
	if info.Bytes <= 0 {
		t.Errorf("checkpoint size %d", info.Bytes)
	}
	waitCount(t, b, atLive+5)
	if st, err := r.Status(ctx, b.Spec.ID); err != nil || st.State != rt.StateRunning {
		t.Fatalf("after a checkpoint left running: %+v, %v", st, err)
	}
	// The files as they were at the checkpoint: a fork's own copy.
	forkRoot := filepath.Join(t.TempDir(), "root")
	if out, err := exec.Command("cp", "-a", rootfs, forkRoot).CombinedOutput(); err != nil {
		t.Fatalf("copy rootfs: %v: %s", err, out)
	}

	// Checkpoint and stop: the processes end; restoring brings them back.
	stopped := filepath.Join(images, "stopped")
	if _, err := r.Checkpoint(ctx, b.Spec.ID, stopped, true); err != nil {
		t.Fatal(err)
	}
	atStop := count(t, b)
	time.Sleep(300 * time.Millisecond)
	if c := count(t, b); c != atStop {
		t.Fatalf("counter moved from %d to %d after a stopping checkpoint", atStop, c)
	}
	if st, err := r.Status(ctx, b.Spec.ID); err != nil || st.State != rt.StateStopped {
		t.Fatalf("after a stopping checkpoint: %+v, %v", st, err)
	}
	b.Destroy(t)
	restored := runtimetest.StartBoxWith(t, r, b.Spec, b.Results, func(spec rt.Spec) (rt.Status, error) {
		return r.Restore(ctx, spec, stopped)
	})
	if c := waitCount(t, restored, atStop+5); c > atStop+200 {
		t.Errorf("restored counter jumped to %d from %d", c, atStop)
	}
	// A restore is a resume, not a boot: the boot id is the one saved.
	if got := bootID(restored); got != boot || boot == "" {
		t.Errorf("boot id after a checkpoint and restore = %q; want %q", got, boot)
	}

	// A fork from the first checkpoint: another id, its own files and
	// results, the counter's memory from the checkpoint.
	spec, results := runtimetest.NewSpec(t, forkRoot, b.Spec.Init)
	fork := runtimetest.StartBoxWith(t, r, spec, results, func(spec rt.Spec) (rt.Status, error) {
		return r.Restore(ctx, spec, live)
	})
	c := waitCount(t, fork, 1)
	if c < beforeLive {
		t.Errorf("fork's counter started at %d; the checkpoint was taken between %d and %d", c, beforeLive, atLive)
	}
	waitCount(t, fork, c+5)
	// The fork is a copy of the running machine, its kernel's state
	// included: gVisor's procfs keeps the id it made at the first boot.
	t.Logf("boot id: sandbox %s, its memory fork %s", boot, bootID(fork))
	waitCount(t, restored, count(t, restored)+5) // both go on, each its own
}

// Checkpointing a paused sandbox leaves it paused; bad input is refused.
func TestCheckpointPausedAndBadInput(t *testing.T) {
	r := newTestRuntime(t)(t)
	ctx := context.Background()
	b := runtimetest.RunScript(t, r, runtimetest.BusyboxRootfs(t), counterScript, nil)
	waitCount(t, b, 3)
	if err := r.Pause(ctx, b.Spec.ID); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "img")
	if _, err := r.Checkpoint(ctx, b.Spec.ID, dir, false); err != nil {
		t.Fatal(err)
	}
	at := count(t, b)
	time.Sleep(300 * time.Millisecond)
	if st, err := r.Status(ctx, b.Spec.ID); err != nil || st.State != rt.StatePaused {
		t.Fatalf("after checkpointing a paused sandbox: %+v, %v", st, err)
	}
	if c := count(t, b); c != at {
		t.Errorf("a paused sandbox counted from %d to %d", at, c)
	}
	if err := r.Resume(ctx, b.Spec.ID); err != nil {
		t.Fatal(err)
	}
	waitCount(t, b, at+3)

	if _, err := r.Checkpoint(ctx, b.Spec.ID, dir, false); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Errorf("checkpoint into an existing directory: %v", err)
	}
	if _, err := r.Checkpoint(ctx, b.Spec.ID, "relative", false); !errors.Is(err, errdefs.ErrInvalid) {
		t.Errorf("relative directory: %v", err)
	}
	if _, err := r.Checkpoint(ctx, "nosuchsandbox", filepath.Join(t.TempDir(), "x"), false); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("unknown sandbox: %v", err)
	}
	spec, _ := runtimetest.NewSpec(t, runtimetest.BusyboxRootfs(t), b.Spec.Init)
	if _, err := r.Restore(ctx, spec, t.TempDir()); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("restore from an empty directory: %v", err)
	}
	if _, err := os.Stat(r.cgroups.bundles.bundle(spec.ID)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused restore left its bundle: %v", err)
	}
}
