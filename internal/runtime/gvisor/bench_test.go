package gvisor

import (
	"context"
	"testing"

	"github.com/warrenhq/warren/internal/ids"
	"github.com/warrenhq/warren/internal/runtime"
	"github.com/warrenhq/warren/internal/runtime/runtimetest"
)

// benchSpec is a sandbox whose PID 1 idles (and reaps) in busybox sh.
func benchSpec(rootfs string) runtime.Spec {
	return runtime.Spec{
		ID:     ids.New(12),
		RootFS: rootfs,
		Init:   []string{"/bin/sh", "-c", "while :; do sleep 1; done"},
		Env:    []string{"PATH=/bin"},
	}
}

func benchRuntime(b *testing.B) (*Runtime, string) {
	runsc := requireRunscB(b)
	r, err := New(Options{Runsc: runsc, Init: helpers.init, StateDir: b.TempDir(), CgroupParent: "warren-bench-" + ids.New(6)})
	if err != nil {
		b.Fatal(err)
	}
	rootfs := runtimetest.NewBusyboxRootfs(b)
	b.Cleanup(func() {
		ids, _ := r.List(context.Background())
		for _, id := range ids {
			_ = r.Destroy(context.Background(), id)
		}
		r.RemoveParentCgroups()
	})
	return r, rootfs
}

// BenchmarkStart measures Start: from the call until runsc says PID 1 has
// started (runsc run --detach returns then).
func BenchmarkStart(b *testing.B) {
	r, rootfs := benchRuntime(b)
	ctx := context.Background()
	for b.Loop() {
		spec := benchSpec(rootfs)
		if _, err := r.Start(ctx, spec); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := r.Destroy(ctx, spec.ID); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// BenchmarkDestroy measures Destroy of a running sandbox.
func BenchmarkDestroy(b *testing.B) {
	r, rootfs := benchRuntime(b)
	ctx := context.Background()
	for b.Loop() {
		b.StopTimer()
		spec := benchSpec(rootfs)
		if _, err := r.Start(ctx, spec); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := r.Destroy(ctx, spec.ID); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPauseResume measures one runsc pause plus one runsc resume.
func BenchmarkPauseResume(b *testing.B) {
	r, rootfs := benchRuntime(b)
	ctx := context.Background()
	spec := benchSpec(rootfs)
	if _, err := r.Start(ctx, spec); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := r.Pause(ctx, spec.ID); err != nil {
			b.Fatal(err)
		}
		if err := r.Resume(ctx, spec.ID); err != nil {
			b.Fatal(err)
		}
	}
}
