package native

import (
	"bytes"
	"context"
	"os"
	"strconv"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/runtime"
)

var _ runtime.LivenessChecker = (*Runtime)(nil)

// facts are what does not change while a sandbox's container lives: its
// cgroup directories and its init process. The metrics sampler and the
// liveness watch ask for them once a second per sandbox; loading the
// container's saved state each time (a JSON decode of its whole config)
// was most of the daemon's idle CPU.
type facts struct {
	cgroupPaths map[string]string
	initPID     int
	initStart   uint64 // in clock ticks since boot, as /proc/PID/stat says
}

// factsOf returns id's facts, loading them once per container.
func (r *Runtime) factsOf(id string) (facts, error) {
	if f, ok := r.facts.Load(id); ok {
		return f.(facts), nil
	}
	c, err := r.loadFresh(id)
	if err != nil {
		return facts{}, err
	}
	s, err := c.State()
	if err != nil {
		return facts{}, err
	}
	f := facts{cgroupPaths: s.CgroupPaths, initPID: s.InitProcessPid, initStart: s.InitProcessStartTime}
	if f.initPID > 0 {
		r.facts.Store(id, f)
	}
	return f, nil
}

// forget drops what is kept of id (its facts and its loaded container):
// its container is going away or being replaced.
func (r *Runtime) forget(id string) {
	r.facts.Delete(id)
	r.containers.Delete(id)
}

// Alive checks id's init process in /proc: the same process (its start
// time matches, so a reused pid is not taken for it) and not a zombie.
func (r *Runtime) Alive(ctx context.Context, id string) (bool, error) {
	f, err := r.factsOf(id)
	if errdefs.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if f.initPID <= 0 {
		return false, nil
	}
	state, start, ok := procStat(f.initPID)
	return ok && start == f.initStart && state != 'Z' && state != 'X', nil
}

// procStat reads a process's state letter and start time from
// /proc/PID/stat; ok is false when it is gone.
func procStat(pid int) (state byte, start uint64, ok bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	// The command name is in parentheses and may hold anything: the
	// fields that follow start after its last ')'.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, 0, false
	}
	fields := bytes.Fields(data[i+1:])
	// fields[0] is field 3 (state); starttime is field 22.
	if len(fields) < 20 || len(fields[0]) != 1 {
		return 0, 0, false
	}
	start, err = strconv.ParseUint(string(fields[19]), 10, 64)
	if err != nil {
		return 0, 0, false
	}
	return fields[0][0], start, true
}
