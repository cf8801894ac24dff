package controller_test

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warrenv1 "github.com/warrenhq/warren/apis/warren/v1alpha1"
	"github.com/warrenhq/warren/internal/kube/controller"
	"github.com/warrenhq/warren/internal/kube/fleet"
)

// fakeMover stands in for the gateway's mover: it repoints the moved
// sandbox's object (as a move does) and records the call; the first call
// waits for release, so that a test can act while a drain is under way.
type fakeMover struct {
	c       client.Client
	ns      string
	first   chan struct{}
	release chan struct{}

	mu    sync.Mutex
	moved []string
}

func (m *fakeMover) MoveOff(ctx context.Context, id string) (string, error) {
	m.mu.Lock()
	m.moved = append(m.moved, id)
	n := len(m.moved)
	m.mu.Unlock()
	if n == 1 {
		close(m.first)
		<-m.release
	}
	sb := &warrenv1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: m.ns, Name: id}}
	patch := []byte(`{"spec":{"nodeName":"elsewhere"}}`)
	return "elsewhere", m.c.Patch(ctx, sb, client.RawPatch(client.Merge.Type(), patch))
}

func (m *fakeMover) calls() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.moved...)
}

// TestDrainFollowsCordon, on the API server with a fake mover: a cordon
// alone marks the WarrenNode Cordoned and moves nothing; the drain
// annotation starts the moves; an uncordon during the first move clears
// both conditions and no further move starts.
func TestDrainFollowsCordon(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	name := f.node(nodeSpec{name: "x", ready: true, runtimes: []string{"native"}, lease: time.Minute})
	kn := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := f.c.Create(ctx, kn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.c.Delete(context.Background(), kn) })
	for _, id := range []string{"a", "b", "c"} {
		f.held(id, name, warrenv1.SandboxPaused, "")
	}
	m := &fakeMover{c: f.c, ns: f.ns, first: make(chan struct{}), release: make(chan struct{})}
	f.start("drain", func(o *controller.Options) { o.Mover = m })

	cond := func(typ string) *metav1.Condition {
		var wn warrenv1.WarrenNode
		if err := f.c.Get(ctx, client.ObjectKey{Name: name}, &wn); err != nil {
			t.Fatal(err)
		}
		for i := range wn.Status.Conditions {
			if wn.Status.Conditions[i].Type == typ {
				return &wn.Status.Conditions[i]
			}
		}
		return nil
	}
	patchNode := func(patch string) {
		t.Helper()
		if err := f.c.Patch(ctx, kn, client.RawPatch(client.Merge.Type(), []byte(patch))); err != nil {
			t.Fatal(err)
		}
	}

	patchNode(`{"spec":{"unschedulable":true}}`)
	f.eventually(30*time.Second, "Cordoned", func() bool { c := cond(fleet.NodeCordoned); return c != nil && c.Status == metav1.ConditionTrue })
	time.Sleep(300 * time.Millisecond)
	if got := m.calls(); len(got) != 0 || cond(fleet.NodeDrained) != nil {
		t.Fatalf("a cordon alone moved %v", got)
	}

	patchNode(`{"metadata":{"annotations":{"` + fleet.DrainAnnotation + `":"true"}}}`)
	select {
	case <-m.first:
	case <-time.After(30 * time.Second):
		t.Fatal("the drain annotation started no move")
	}
	if c := cond(fleet.NodeDrained); c == nil || c.Reason != controller.ReasonDraining {
		t.Errorf("during the drain: %+v", c)
	}
	patchNode(`{"spec":{"unschedulable":null}}`)
	close(m.release)
	f.eventually(30*time.Second, "conditions cleared", func() bool {
		return cond(fleet.NodeCordoned) == nil && cond(fleet.NodeDrained) == nil
	})
	time.Sleep(500 * time.Millisecond)
	if got := m.calls(); len(got) != 1 {
		t.Errorf("moves after the uncordon: %v, want only the one under way", got)
	}
}
