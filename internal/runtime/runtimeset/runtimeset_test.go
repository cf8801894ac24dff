package runtimeset

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/runtime"
)

// memRuntime keeps sandboxes in a map: enough to see where calls go.
type memRuntime struct {
	name  string
	mu    sync.Mutex
	boxes map[string]runtime.State
	calls []string
}

func newMem(name string) *memRuntime {
	return &memRuntime{name: name, boxes: map[string]runtime.State{}}
}

func (r *memRuntime) Name() string                       { return r.name }
func (r *memRuntime) Capabilities() runtime.Capabilities { return runtime.Capabilities{Pause: true} }

func (r *memRuntime) record(op, id string) {
	r.calls = append(r.calls, op+" "+id)
}

func (r *memRuntime) Start(ctx context.Context, spec runtime.Spec) (runtime.Status, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.record("start", spec.ID)
	if _, ok := r.boxes[spec.ID]; ok {
		return runtime.Status{}, errdefs.ErrAlreadyExists
	}
	r.boxes[spec.ID] = runtime.StateRunning
	return runtime.Status{ID: spec.ID, State: runtime.StateRunning, InitPID: 1, Created: time.Now()}, nil
}

func (r *memRuntime) get(op, id string) (runtime.Status, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.record(op, id)
	st, ok := r.boxes[id]
	if !ok {
		return runtime.Status{}, fmt.Errorf("%s: %w", id, errdefs.ErrNotFound)
	}
	return runtime.Status{ID: id, State: st}, nil
}

func (r *memRuntime) Recover(ctx context.Context, id string) (runtime.Status, error) {
	return r.get("recover", id)
}
func (r *memRuntime) Status(ctx context.Context, id string) (runtime.Status, error) {
	return r.get("status", id)
}

func (r *memRuntime) set(op, id string, st runtime.State) error {
	if _, err := r.get(op, id); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.boxes[id] = st
	return nil
}

func (r *memRuntime) Pause(ctx context.Context, id string) error {
	return r.set("pause", id, runtime.StatePaused)
}
func (r *memRuntime) Resume(ctx context.Context, id string) error {
	return r.set("resume", id, runtime.StateRunning)
}

func (r *memRuntime) Destroy(ctx context.Context, id string) error {
	if _, err := r.get("destroy", id); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.boxes, id)
	return nil
}

func (r *memRuntime) List(ctx context.Context) ([]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for id := range r.boxes {
		out = append(out, id)
	}
	return out, nil
}

func (r *memRuntime) count(op string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.calls {
		if len(c) > len(op) && c[:len(op)+1] == op+" " {
			n++
		}
	}
	return n
}

func TestRouting(t *testing.T) {
	ctx := context.Background()
	native, gvisor := newMem("native"), newMem("gvisor")
	s, err := New("native", Member{Runtime: native}, Member{Runtime: gvisor})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Start(ctx, runtime.Spec{ID: "a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.StartOn(ctx, "gvisor", runtime.Spec{ID: "b"}); err != nil {
		t.Fatal(err)
	}
	if native.count("start") != 1 || gvisor.count("start") != 1 {
		t.Fatalf("starts: native %v, gvisor %v", native.calls, gvisor.calls)
	}
	// The same id on another runtime is taken.
	if _, err := s.StartOn(ctx, "gvisor", runtime.Spec{ID: "a"}); !errors.Is(err, errdefs.ErrAlreadyExists) {
		t.Errorf("StartOn(gvisor, a) = %v; want ErrAlreadyExists", err)
	}

	// A new Set over the same runtimes (a restarted daemon) finds each
	// sandbox where it lives.
	s2, _ := New("native", Member{Runtime: native}, Member{Runtime: gvisor})
	for id, want := range map[string]string{"a": "native", "b": "gvisor"} {
		if got, err := s2.RuntimeOf(ctx, id); err != nil || got != want {
			t.Errorf("RuntimeOf(%s) = %q, %v; want %s", id, got, err, want)
		}
	}
	if err := s2.Pause(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if gvisor.count("pause") != 1 || native.count("pause") != 0 {
		t.Errorf("pause went to native %v / gvisor %v", native.calls, gvisor.calls)
	}
	if st, err := s2.Recover(ctx, "b"); err != nil || st.State != runtime.StatePaused {
		t.Errorf("Recover(b) = %+v, %v", st, err)
	}
	list, err := s2.List(ctx)
	if err != nil || len(list) != 2 {
		t.Errorf("List = %v, %v", list, err)
	}
	for _, id := range []string{"a", "b"} {
		if err := s2.Destroy(ctx, id); err != nil {
			t.Errorf("Destroy(%s): %v", id, err)
		}
		if err := s2.Destroy(ctx, id); !errdefs.IsNotFound(err) {
			t.Errorf("second Destroy(%s) = %v; want ErrNotFound", id, err)
		}
		if _, err := s2.Status(ctx, id); !errdefs.IsNotFound(err) {
			t.Errorf("Status(%s) after Destroy = %v; want ErrNotFound", id, err)
		}
	}
}

func TestAvailability(t *testing.T) {
	ctx := context.Background()
	native, gvisor := newMem("native"), newMem("gvisor")
	broken := errors.New("runsc cannot start a sandbox")
	s, err := New("native", Member{Runtime: native}, Member{Runtime: gvisor, Unavailable: broken})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Available("gvisor"); !errdefs.IsUnsupported(err) {
		t.Errorf("Available(gvisor) = %v; want ErrUnsupported", err)
	}
	if _, err := s.StartOn(ctx, "gvisor", runtime.Spec{ID: "x"}); !errdefs.IsUnsupported(err) {
		t.Errorf("StartOn(unavailable) = %v; want ErrUnsupported", err)
	}
	if err := s.Available("kvm"); !errdefs.IsInvalid(err) {
		t.Errorf("Available(kvm) = %v; want ErrInvalid", err)
	}
	if err := s.Available(""); err != nil {
		t.Errorf("Available(default) = %v", err)
	}
	// An unavailable runtime's existing sandboxes are still managed.
	gvisor.boxes["old"] = runtime.StateRunning
	if err := s.Destroy(ctx, "old"); err != nil {
		t.Errorf("Destroy on an unavailable runtime: %v", err)
	}
	if _, err := New("gvisor", Member{Runtime: native}, Member{Runtime: gvisor, Unavailable: broken}); err == nil {
		t.Errorf("New with an unavailable default succeeded")
	}
	// A runtime that could not be opened at all is known, not available.
	s3, err := New("native", Member{Runtime: native}, Member{Name: "gvisor", Unavailable: broken})
	if err != nil {
		t.Fatal(err)
	}
	if err := s3.Available("gvisor"); !errdefs.IsUnsupported(err) {
		t.Errorf("Available(unopened gvisor) = %v; want ErrUnsupported", err)
	}
	if err := s3.Destroy(ctx, "nothing"); !errdefs.IsNotFound(err) {
		t.Errorf("Destroy(unknown) = %v; want ErrNotFound", err)
	}
	if _, err := New("kvm", Member{Runtime: native}); !errdefs.IsInvalid(err) {
		t.Errorf("New with an unknown default = %v; want ErrInvalid", err)
	}
}
