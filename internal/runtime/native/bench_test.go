package native

import (
	"context"
	"testing"

	"github.com/warrenhq/warren/internal/ids"
	"github.com/warrenhq/warren/internal/runtime"
	"github.com/warrenhq/warren/internal/runtime/runtimetest"
	"github.com/warrenhq/warren/internal/testutil"
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
	testutil.RequireRoot(b)
	r, err := New(Options{StateDir: b.TempDir(), CgroupParent: "warren-bench-" + ids.New(6)})
	if err != nil {
		b.Fatal(err)
	}
	rootfs := runtimetest.NewBusyboxRootfs(b)
	b.Cleanup(func() {
		ids, _ := r.List(context.Background())
		for _, id := range ids {
			_ = r.Destroy(context.Background(), id)
		}
		removeCgroupParent(b, r)
	})
	return r, rootfs
}

// BenchmarkStart measures Start: from the call until PID 1 has been exec'd
// (Start returns then).
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

// BenchmarkDestroy measures Destroy of a running sandbox: kill, wait for
// its processes to go, remove cgroups and state.
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

// BenchmarkPauseResume measures one freeze plus one thaw.
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

// BenchmarkStartUserNS is BenchmarkStart in a user namespace (idmapped
// root, the user namespace made for its mapping).
func BenchmarkStartUserNS(b *testing.B) {
	r, rootfs := benchRuntime(b)
	ctx := context.Background()
	for b.Loop() {
		spec := benchSpec(rootfs)
		u := testRange
		spec.UserNS = &u
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

// BenchmarkIdmappedRoot is the part of a start a user namespace adds
// before libcontainer runs: a user namespace for the mapping and the
// idmapped mount of the root.
func BenchmarkIdmappedRoot(b *testing.B) {
	r, rootfs := benchRuntime(b)
	for b.Loop() {
		ns, err := openUserNS(testRange)
		if err != nil {
			b.Fatal(err)
		}
		_, err = r.roots.mount("bench", rootfs, ns)
		ns.Close()
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := r.roots.remove("bench"); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
