package session

import (
	"fmt"
	"maps"
	"slices"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/store"
)

// The lifecycle of a sandbox:
//
//	creating ──► running ◄──► paused
//	    │           │  ▲  ╲       │
//	    │           │  │   ╲      ▼
//	    │           │  └── hibernated (memory on disk; gvisor)
//	    │           ▼             │
//	    │        stopped ──► destroyed
//	    │           ▲
//	    └──────► failed (with a reason) ◄── any live state
//
// A record in "creating" at start-up belonged to a daemon that died
// mid-create: it is failed and its parts removed. A hibernated sandbox has
// no processes, only its files and the image of its memory; resuming it
// restores them.
const (
	StateCreating = store.SandboxState("creating")
	StateRunning  = store.SandboxState("running")
	StatePaused   = store.SandboxState("paused")
	// StateHibernated: the processes were saved to disk and ended.
	StateHibernated = store.SandboxState("hibernated")
	StateStopped    = store.SandboxState("stopped")
	StateDestroyed  = store.SandboxState("destroyed")
	StateFailed     = store.SandboxState("failed")
)

var transitions = map[store.SandboxState][]store.SandboxState{
	StateCreating:   {StateRunning, StateFailed, StateDestroyed},
	StateRunning:    {StatePaused, StateHibernated, StateStopped, StateFailed, StateDestroyed},
	StatePaused:     {StateRunning, StateHibernated, StateStopped, StateFailed, StateDestroyed},
	StateHibernated: {StateRunning, StateStopped, StateFailed, StateDestroyed},
	StateStopped:    {StateDestroyed, StateFailed},
	StateFailed:     {StateDestroyed},
	StateDestroyed:  nil,
}

// liveStates are the states that hold resources and count against the
// sandbox limit. A hibernated sandbox holds only disk: it does not count.
var liveStates = []store.SandboxState{StateCreating, StateRunning, StatePaused}

// canTransition reports whether from → to is allowed.
func canTransition(from, to store.SandboxState) bool {
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// sourcesOf lists the states from which `to` may be entered; it feeds the
// store's compare-and-set.
func sourcesOf(to store.SandboxState) []store.SandboxState {
	var from []store.SandboxState
	for s, tos := range transitions {
		for _, t := range tos {
			if t == to {
				from = append(from, s)
			}
		}
	}
	return from
}

func checkTransition(id string, from, to store.SandboxState) error {
	if !canTransition(from, to) {
		return fmt.Errorf("sandbox %s is %s and cannot become %s: %w", id, from, to, errdefs.ErrConflict)
	}
	return nil
}

// States lists every state of the lifecycle, sorted.
func States() []store.SandboxState { return slices.Sorted(maps.Keys(transitions)) }
