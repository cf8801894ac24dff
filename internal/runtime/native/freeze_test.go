package native

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/cgroups"

	"github.com/warrenhq/warren/internal/runtime/runtimetest"
)

// TestPauseStopsABusySandbox freezes, again and again, a sandbox whose
// shell forks and writes all the time: after each Pause the freezer says
// FROZEN and its counter stands still; after each Resume it moves again.
func TestPauseStopsABusySandbox(t *testing.T) {
	mk := newTestRuntime(t)
	r := mk(t)
	b := runtimetest.RunScript(t, r, runtimetest.BusyboxRootfs(t),
		`i=0; while :; do i=$((i+1)); echo $i > /results/count; x=$(echo $i); done`, nil)
	b.WaitFile(t, "count", 10*time.Second)
	ctx := context.Background()
	count := func() string {
		data, _ := os.ReadFile(filepath.Join(b.Results, "count"))
		return strings.TrimSpace(string(data))
	}
	for round := range 20 {
		if err := r.Pause(ctx, b.Spec.ID); err != nil {
			t.Fatalf("round %d: Pause: %v", round, err)
		}
		if !cgroups.IsCgroup2UnifiedMode() {
			f, err := r.factsOf(b.Spec.ID)
			if err != nil {
				t.Fatal(err)
			}
			state, err := os.ReadFile(filepath.Join(f.cgroupPaths["freezer"], "freezer.state"))
			if err != nil || strings.TrimSpace(string(state)) != "FROZEN" {
				t.Fatalf("round %d: freezer.state %q after Pause (%v)", round, state, err)
			}
		}
		before := count()
		time.Sleep(30 * time.Millisecond)
		if after := count(); after != before {
			t.Fatalf("round %d: the counter moved from %q to %q while paused", round, before, after)
		}
		if err := r.Resume(ctx, b.Spec.ID); err != nil {
			t.Fatalf("round %d: Resume: %v", round, err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for c := count(); c == before || c == ""; c = count() {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the counter stayed at %q after Resume", round, before)
			}
			time.Sleep(time.Millisecond)
		}
	}
}

func TestFreezeV1RefusesAMissingCgroup(t *testing.T) {
	if _, err := freezeV1(filepath.Join(t.TempDir(), "nonesuch")); err == nil {
		t.Fatal("froze a cgroup that does not exist")
	}
}
