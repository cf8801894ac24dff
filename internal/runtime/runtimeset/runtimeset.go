// Package runtimeset puts several runtimes (native, gvisor) behind one
// runtime.Runtime: a new sandbox starts on the runtime asked for by name,
// and every later call on a sandbox (status, recover, pause, destroy,
// stats, limits) goes to the runtime that holds its state.
//
// Which runtime holds a sandbox is asked of the runtimes themselves (each
// keeps its sandboxes' state on disk) and remembered, so that a sandbox
// started by an earlier daemon is found the same way as one started by this
// one.
package runtimeset

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/runtime"
)

// Member is one runtime of a Set.
type Member struct {
	// Name is the runtime's name; empty means Runtime.Name().
	Name    string
	Runtime runtime.Runtime
	// Unavailable, when set, refuses new sandboxes on this runtime (its
	// probe failed) and says why; its existing sandboxes are still managed.
	// A member whose runtime could not even be opened has a nil Runtime.
	Unavailable error
}

func (m Member) name() string {
	if m.Name != "" || m.Runtime == nil {
		return m.Name
	}
	return m.Runtime.Name()
}

// Set is a runtime.Runtime over several runtimes.
type Set struct {
	members []Member // in the order given; the first is asked first
	def     string

	mu    sync.Mutex
	owner map[string]runtime.Runtime
}

var (
	_ runtime.Runtime     = (*Set)(nil)
	_ runtime.StatsReader = (*Set)(nil)
	_ runtime.DirtyReader = (*Set)(nil)
)

// New returns a Set whose Start uses the runtime named def.
func New(def string, members ...Member) (*Set, error) {
	for _, m := range members {
		if m.Runtime == nil && m.Unavailable == nil {
			return nil, fmt.Errorf("runtime %q has neither a runtime nor a reason: %w", m.Name, errdefs.ErrInvalid)
		}
	}
	s := &Set{members: members, def: def, owner: map[string]runtime.Runtime{}}
	m, ok := s.member(def)
	if !ok {
		return nil, fmt.Errorf("default runtime %q: want one of %s: %w", def, strings.Join(s.Names(), ", "), errdefs.ErrInvalid)
	}
	if m.Unavailable != nil {
		return nil, fmt.Errorf("default runtime %q cannot run sandboxes here: %w", def, m.Unavailable)
	}
	return s, nil
}

// Names lists the runtimes' names.
func (s *Set) Names() []string {
	var out []string
	for _, m := range s.members {
		out = append(out, m.name())
	}
	return out
}

// Members returns the runtimes of the set.
func (s *Set) Members() []Member { return slices.Clone(s.members) }

func (s *Set) member(name string) (Member, bool) {
	for _, m := range s.members {
		if m.name() == name {
			return m, true
		}
	}
	return Member{}, false
}

// opened are the members whose runtime is open: the ones that may hold
// sandboxes.
func (s *Set) opened() []runtime.Runtime {
	var out []runtime.Runtime
	for _, m := range s.members {
		if m.Runtime != nil {
			out = append(out, m.Runtime)
		}
	}
	return out
}

// Name is the default runtime's name.
func (s *Set) Name() string { return s.def }

// Capabilities are the default runtime's; see CapabilitiesOf.
func (s *Set) Capabilities() runtime.Capabilities {
	m, _ := s.member(s.def)
	return m.Runtime.Capabilities()
}

// CapabilitiesOf returns the capabilities of the runtime named name.
func (s *Set) CapabilitiesOf(name string) (runtime.Capabilities, bool) {
	m, ok := s.member(name)
	if !ok || m.Runtime == nil {
		return runtime.Capabilities{}, false
	}
	return m.Runtime.Capabilities(), true
}

// Available says whether new sandboxes can start on the runtime named name
// (nil), or why not: an unknown name is ErrInvalid, a runtime that cannot
// run here ErrUnsupported with its probe's reason.
func (s *Set) Available(name string) error {
	if name == "" {
		name = s.def
	}
	m, ok := s.member(name)
	if !ok {
		return fmt.Errorf("runtime %q: want one of %s: %w", name, strings.Join(s.Names(), ", "), errdefs.ErrInvalid)
	}
	if m.Unavailable != nil {
		return fmt.Errorf("the %s runtime is not available on this server: %v: %w", name, m.Unavailable, errdefs.ErrUnsupported)
	}
	return nil
}

// Start starts spec on the default runtime.
func (s *Set) Start(ctx context.Context, spec runtime.Spec) (runtime.Status, error) {
	return s.StartOn(ctx, s.def, spec)
}

// StartOn starts spec on the runtime named name ("" = the default).
func (s *Set) StartOn(ctx context.Context, name string, spec runtime.Spec) (runtime.Status, error) {
	if err := s.Available(name); err != nil {
		return runtime.Status{}, err
	}
	if name == "" {
		name = s.def
	}
	// An id another runtime holds is taken: the runtimes do not see each
	// other's state.
	if rt, err := s.find(ctx, spec.ID); err == nil && rt.Name() != name {
		return runtime.Status{}, fmt.Errorf("sandbox %s exists on the %s runtime: %w", spec.ID, rt.Name(), errdefs.ErrAlreadyExists)
	}
	m, _ := s.member(name)
	st, err := m.Runtime.Start(ctx, spec)
	if err == nil {
		s.remember(spec.ID, m.Runtime)
	}
	return st, err
}

func (s *Set) remember(id string, rt runtime.Runtime) {
	s.mu.Lock()
	s.owner[id] = rt
	s.mu.Unlock()
}

func (s *Set) forget(id string) {
	s.mu.Lock()
	delete(s.owner, id)
	s.mu.Unlock()
}

// find returns the runtime holding id's state, or ErrNotFound.
func (s *Set) find(ctx context.Context, id string) (runtime.Runtime, error) {
	s.mu.Lock()
	rt := s.owner[id]
	s.mu.Unlock()
	if rt != nil {
		return rt, nil
	}
	var errs []error
	for _, rt := range s.opened() {
		_, err := rt.Status(ctx, id)
		if err == nil {
			s.remember(id, rt)
			return rt, nil
		}
		if !errdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("%s: %w", rt.Name(), err))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return nil, fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
}

// RuntimeOf names the runtime holding id.
func (s *Set) RuntimeOf(ctx context.Context, id string) (string, error) {
	rt, err := s.find(ctx, id)
	if err != nil {
		return "", err
	}
	return rt.Name(), nil
}

// Recover reattaches to id on the runtime holding it.
func (s *Set) Recover(ctx context.Context, id string) (runtime.Status, error) {
	rt, err := s.find(ctx, id)
	if err != nil {
		return runtime.Status{}, err
	}
	return rt.Recover(ctx, id)
}

// Status reports id's state.
func (s *Set) Status(ctx context.Context, id string) (runtime.Status, error) {
	rt, err := s.find(ctx, id)
	if err != nil {
		return runtime.Status{}, err
	}
	st, err := rt.Status(ctx, id)
	if errdefs.IsNotFound(err) {
		s.forget(id)
	}
	return st, err
}

// Pause pauses id.
func (s *Set) Pause(ctx context.Context, id string) error {
	rt, err := s.find(ctx, id)
	if err != nil {
		return err
	}
	return rt.Pause(ctx, id)
}

// Resume resumes id.
func (s *Set) Resume(ctx context.Context, id string) error {
	rt, err := s.find(ctx, id)
	if err != nil {
		return err
	}
	return rt.Resume(ctx, id)
}

// Destroy destroys id wherever it is, half-made sandboxes included (which
// no runtime's Status finds): every runtime is asked. An id no runtime
// knows is ErrNotFound.
func (s *Set) Destroy(ctx context.Context, id string) error {
	s.forget(id)
	found := false
	var errs []error
	for _, rt := range s.opened() {
		err := rt.Destroy(ctx, id)
		switch {
		case err == nil:
			found = true
		case !errdefs.IsNotFound(err):
			found = true
			errs = append(errs, err)
		}
	}
	if !found {
		return fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	return errors.Join(errs...)
}

// List returns the ids every runtime has state for.
func (s *Set) List(ctx context.Context) ([]string, error) {
	var out []string
	var errs []error
	for _, rt := range s.opened() {
		ids, err := rt.List(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", rt.Name(), err))
		}
		out = append(out, ids...)
	}
	slices.Sort(out)
	return slices.Compact(out), errors.Join(errs...)
}

// Stats reads id's counters from its runtime, if that runtime can.
func (s *Set) Stats(ctx context.Context, id string) (runtime.Stats, error) {
	rt, err := s.find(ctx, id)
	if err != nil {
		return runtime.Stats{}, err
	}
	sr, ok := rt.(runtime.StatsReader)
	if !ok {
		return runtime.Stats{}, fmt.Errorf("the %s runtime cannot read stats: %w", rt.Name(), errdefs.ErrUnsupported)
	}
	return sr.Stats(ctx, id)
}

// DirtyBytes reads id's unwritten page cache from its runtime, if that
// runtime can.
func (s *Set) DirtyBytes(ctx context.Context, id string) (int64, error) {
	rt, err := s.find(ctx, id)
	if err != nil {
		return 0, err
	}
	dr, ok := rt.(runtime.DirtyReader)
	if !ok {
		return 0, fmt.Errorf("the %s runtime cannot read dirty bytes: %w", rt.Name(), errdefs.ErrUnsupported)
	}
	return dr.DirtyBytes(ctx, id)
}

// Alive reports whether id's init process runs, through its runtime's
// LivenessChecker when it has one, else its Status.
func (s *Set) Alive(ctx context.Context, id string) (bool, error) {
	rt, err := s.find(ctx, id)
	if errdefs.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return runtime.IsAlive(ctx, rt, id)
}

// UpdateLimits changes id's limits, if its runtime can.
func (s *Set) UpdateLimits(ctx context.Context, id string, l runtime.Limits) error {
	rt, err := s.find(ctx, id)
	if err != nil {
		return err
	}
	u, ok := rt.(interface {
		UpdateLimits(ctx context.Context, id string, l runtime.Limits) error
	})
	if !ok {
		return fmt.Errorf("the %s runtime cannot change limits of a running sandbox: %w", rt.Name(), errdefs.ErrUnsupported)
	}
	return u.UpdateLimits(ctx, id, l)
}

// RemoveParentCgroups removes every runtime's empty parent cgroups.
func (s *Set) RemoveParentCgroups() {
	for _, rt := range s.opened() {
		if r, ok := rt.(interface{ RemoveParentCgroups() }); ok {
			r.RemoveParentCgroups()
		}
	}
}

// SignalInit sends sig to id's PID 1, if its runtime can.
func (s *Set) SignalInit(ctx context.Context, id string, sig syscall.Signal) error {
	rt, err := s.find(ctx, id)
	if err != nil {
		return err
	}
	si, ok := rt.(interface {
		SignalInit(ctx context.Context, id string, sig syscall.Signal) error
	})
	if !ok {
		return fmt.Errorf("the %s runtime cannot signal PID 1: %w", rt.Name(), errdefs.ErrUnsupported)
	}
	return si.SignalInit(ctx, id, sig)
}

// ExecNaive runs argv in id with a new process, if its runtime can (the
// baseline `warren bench` measures the agent against).
func (s *Set) ExecNaive(ctx context.Context, id string, argv []string) (int, error) {
	rt, err := s.find(ctx, id)
	if err != nil {
		return 0, err
	}
	ne, ok := rt.(interface {
		ExecNaive(ctx context.Context, id string, argv []string) (int, error)
	})
	if !ok {
		return 0, fmt.Errorf("the %s runtime cannot exec without the agent: %w", rt.Name(), errdefs.ErrUnsupported)
	}
	return ne.ExecNaive(ctx, id, argv)
}

// Checkpoint saves id's memory and processes, if its runtime can.
func (s *Set) Checkpoint(ctx context.Context, id, dir string, stop bool) (runtime.CheckpointInfo, error) {
	rt, err := s.find(ctx, id)
	if err != nil {
		return runtime.CheckpointInfo{}, err
	}
	c, ok := rt.(runtime.Checkpointer)
	if !ok || !rt.Capabilities().MemorySnapshot {
		return runtime.CheckpointInfo{}, fmt.Errorf("sandbox %s runs on the %s runtime, which cannot save memory; memory snapshots need the gvisor runtime (filesystem snapshots work on every runtime): %w", id, rt.Name(), errdefs.ErrUnsupported)
	}
	return c.Checkpoint(ctx, id, dir, stop)
}

// Restore starts spec on the runtime named name ("" = the default) from
// the checkpoint in dir.
func (s *Set) Restore(ctx context.Context, name string, spec runtime.Spec, dir string) (runtime.Status, error) {
	if err := s.Available(name); err != nil {
		return runtime.Status{}, err
	}
	if name == "" {
		name = s.def
	}
	m, _ := s.member(name)
	c, ok := m.Runtime.(runtime.Checkpointer)
	if !ok || !m.Runtime.Capabilities().MemorySnapshot {
		return runtime.Status{}, fmt.Errorf("the %s runtime cannot restore memory; memory snapshots need the gvisor runtime: %w", name, errdefs.ErrUnsupported)
	}
	if rt, err := s.find(ctx, spec.ID); err == nil && rt.Name() != name {
		return runtime.Status{}, fmt.Errorf("sandbox %s exists on the %s runtime: %w", spec.ID, rt.Name(), errdefs.ErrAlreadyExists)
	}
	st, err := c.Restore(ctx, spec, dir)
	if err == nil {
		s.remember(spec.ID, m.Runtime)
	}
	return st, err
}
