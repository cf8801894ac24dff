package server

import (
	"fmt"
	"net/http"
	"time"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/runtime"
	"github.com/warrenhq/warren/internal/session"
	"github.com/warrenhq/warren/internal/store"
)

// lifecycleRoutes serve pause, hibernate, resume, stop, timeouts and limits.
type lifecycleRoutes struct {
	sandboxViews
	lifecycle Lifecycle
}

// timeoutChecker says whether this server allows a run timeout.
type timeoutChecker interface {
	CheckTimeout(d time.Duration) error
}

// timeoutBody is the body of /timeout, /resume and /connect: {timeout:
// seconds, memory?}. memory false (the SDK's onResume: 'reboot') boots a
// paused sandbox cold rather than bring its memory back; /timeout takes
// no memory.
type timeoutBody struct {
	Timeout *int64 `json:"timeout,omitempty"`
	Memory  *bool  `json:"memory,omitempty"`
}

// runTimeout checks a run timeout in seconds from a request (create, fork,
// /timeout, /resume and /connect) and converts it; nil stays nil (none
// given). Past the range check the session service decides, e.g. whether
// 0 (never) is allowed on this server.
func runTimeout(c timeoutChecker, seconds *int64) (*time.Duration, error) {
	if seconds == nil {
		return nil, nil
	}
	// Compared in seconds: a huge value multiplied into a Duration first
	// would overflow and could pass as a small one.
	if *seconds < 0 || *seconds > int64(maxTimeout/time.Second) {
		return nil, fmt.Errorf("timeout %d s is outside 0..%d s: %w", *seconds, int(maxTimeout.Seconds()), errdefs.ErrInvalid)
	}
	d := time.Duration(*seconds) * time.Second
	if err := c.CheckTimeout(d); err != nil {
		return nil, err
	}
	return &d, nil
}

// pauseSandbox serves POST /sandboxes/{id}/pause. E2B sends {memory?}
// (the SDK's keepMemory). Absent (the SDK's default) freezes the processes
// in place. true keeps the memory too: saved to disk with the processes,
// which are freed — hibernation — where the runtime can (gvisor), frozen in
// RAM elsewhere. false keeps only the files: the processes end, and the
// next connect boots the sandbox cold.
func (s *lifecycleRoutes) pauseSandbox(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Memory *bool `json:"memory,omitempty"`
	}
	if err := decodeJSON(w, r, &body); err != nil {
		writeError(w, r, err)
		return
	}
	team, id := teamOf(r), r.PathValue("id")
	var err error
	switch {
	case body.Memory != nil && !*body.Memory:
		err = s.lifecycle.PauseFiles(r.Context(), team, id)
	case body.Memory != nil && s.savesMemory(r):
		_, err = s.lifecycle.Hibernate(r.Context(), team, id)
	default:
		err = s.lifecycle.Pause(r.Context(), team, id)
	}
	if err != nil {
		writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// savesMemory reports whether the request's sandbox runs on a runtime that
// can save its memory to disk.
func (s *lifecycleRoutes) savesMemory(r *http.Request) bool {
	rec, err := s.lifecycle.Get(r.Context(), teamOf(r), r.PathValue("id"))
	return err == nil && s.detailOf(rec).MemorySnapshot
}

// hibernateSandbox serves POST /sandboxes/{id}/hibernate: 200 with the
// hibernated sandbox.
func (s *lifecycleRoutes) hibernateSandbox(w http.ResponseWriter, r *http.Request) {
	if err := decodeJSON(w, r, &struct{}{}); err != nil {
		writeError(w, r, err)
		return
	}
	rec, err := s.lifecycle.Hibernate(r.Context(), teamOf(r), r.PathValue("id"))
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.detailOf(rec))
}

// resumeSandbox serves POST /sandboxes/{id}/resume and the /connect routes:
// 201 with the sandbox if it was paused and is now resumed, 200 if it was
// running. A timeout in the body resets the run timeout from now; memory
// false reboots a paused sandbox (a filesystem-only pause always does).
func (s *lifecycleRoutes) resumeSandbox(w http.ResponseWriter, r *http.Request) {
	var body timeoutBody
	if err := decodeJSON(w, r, &body); err != nil {
		writeError(w, r, err)
		return
	}
	d, err := runTimeout(s.lifecycle, body.Timeout)
	if err != nil {
		writeError(w, r, err)
		return
	}
	id := r.PathValue("id")
	resume := s.lifecycle.Resume
	if body.Memory != nil && !*body.Memory {
		resume = s.lifecycle.Reboot
	}
	resumed, err := resume(r.Context(), teamOf(r), id)
	if err != nil {
		writeError(w, r, err)
		return
	}
	if d != nil {
		// A resumed sandbox runs for the timeout asked; a running one
		// keeps a later end it has (E2B's connect never shortens it).
		set := s.lifecycle.ExtendTimeout
		if resumed {
			set = s.lifecycle.SetTimeout
		}
		if err := set(r.Context(), teamOf(r), id, *d); err != nil {
			writeError(w, r, err)
			return
		}
	}
	rec, err := s.lifecycle.Get(r.Context(), teamOf(r), id)
	if err != nil {
		writeError(w, r, err)
		return
	}
	status := http.StatusOK
	if resumed {
		status = http.StatusCreated
	}
	writeJSON(w, status, s.sandboxOf(rec))
}

func (s *lifecycleRoutes) setTimeout(w http.ResponseWriter, r *http.Request) {
	var body timeoutBody
	if err := decodeJSON(w, r, &body); err != nil {
		writeError(w, r, err)
		return
	}
	if body.Timeout == nil {
		writeError(w, r, fmt.Errorf("timeout (seconds) is missing: %w", errdefs.ErrInvalid))
		return
	}
	if body.Memory != nil {
		writeError(w, r, fmt.Errorf("memory is for /connect and /resume, not /timeout: %w", errdefs.ErrInvalid))
		return
	}
	d, err := runTimeout(s.lifecycle, body.Timeout)
	if err != nil {
		writeError(w, r, err)
		return
	}
	if err := s.lifecycle.SetTimeout(r.Context(), teamOf(r), r.PathValue("id"), *d); err != nil {
		writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// stopBody is the body of POST /sandboxes/{id}/stop.
type stopBody struct {
	// Grace is how long (seconds) the processes get after SIGTERM before
	// SIGKILL; default 10. Kill skips SIGTERM.
	Grace *float64 `json:"grace,omitempty"`
	Kill  bool     `json:"kill,omitempty"`
	// Drain refuses new calls and waits up to DrainWait seconds (default
	// 60) for running commands before stopping.
	Drain     bool     `json:"drain,omitempty"`
	DrainWait *float64 `json:"drainWait,omitempty"`
}

// defaultGrace is a graceful stop's grace period when none is given;
// defaultDrainWait how long a drain waits for running commands.
const (
	defaultGrace     = 10 * time.Second
	defaultDrainWait = 60 * time.Second
)

func (s *lifecycleRoutes) stopSandbox(w http.ResponseWriter, r *http.Request) {
	var body stopBody
	if err := decodeJSON(w, r, &body); err != nil {
		writeError(w, r, err)
		return
	}
	grace := defaultGrace
	if body.Grace != nil {
		if *body.Grace < 0 || *body.Grace > session.MaxGrace.Seconds() {
			writeError(w, r, fmt.Errorf("grace %v s is outside 0..%v s: %w", *body.Grace, session.MaxGrace.Seconds(), errdefs.ErrInvalid))
			return
		}
		grace = time.Duration(*body.Grace * float64(time.Second))
	}
	if body.Kill {
		grace = 0
	}
	var rec store.Sandbox
	var graceful bool
	var err error
	if body.Drain {
		wait := defaultDrainWait
		if body.DrainWait != nil {
			if *body.DrainWait < 0 || *body.DrainWait > session.MaxDrainWait.Seconds() {
				writeError(w, r, fmt.Errorf("drainWait %v s is outside 0..%v s: %w", *body.DrainWait, session.MaxDrainWait.Seconds(), errdefs.ErrInvalid))
				return
			}
			wait = time.Duration(*body.DrainWait * float64(time.Second))
		}
		rec, graceful, err = s.lifecycle.Drain(r.Context(), teamOf(r), r.PathValue("id"), wait, grace)
	} else {
		rec, graceful, err = s.lifecycle.Stop(r.Context(), teamOf(r), r.PathValue("id"), grace)
	}
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		client.SandboxDetail
		Graceful bool `json:"graceful"`
	}{s.detailOf(rec), graceful})
}

// updateLimits serves POST /sandboxes/{id}/limits {memoryMB, cpuCount,
// pids, diskMB}: the limits change in place; zero fields keep theirs.
func (s *lifecycleRoutes) updateLimits(w http.ResponseWriter, r *http.Request) {
	var body client.Limits
	if err := decodeJSON(w, r, &body); err != nil {
		writeError(w, r, err)
		return
	}
	for _, l := range []struct {
		name  string
		value float64
	}{{"memoryMB", float64(body.MemoryMB)}, {"cpuCount", body.CPUCount}, {"pids", float64(body.Pids)}, {"diskMB", float64(body.DiskMB)}} {
		// The upper bound keeps the MiB → bytes shifts from overflowing.
		if l.value < 0 || l.value > 1<<30 {
			writeError(w, r, fmt.Errorf("%s %v: want 0 (unchanged) or a positive value up to %d: %w", l.name, l.value, 1<<30, errdefs.ErrInvalid))
			return
		}
	}
	rec, err := s.lifecycle.UpdateLimits(r.Context(), teamOf(r), r.PathValue("id"),
		runtime.Limits{MemoryBytes: body.MemoryMB << 20, CPUMillis: int64(body.CPUCount * 1000), Pids: body.Pids}, body.DiskMB<<20)
	if err != nil {
		writeError(w, r, err)
		return
	}
	d := s.detailOf(rec)
	addDiskUsage(r, s.lifecycle, &d)
	writeJSON(w, http.StatusOK, d)
}
