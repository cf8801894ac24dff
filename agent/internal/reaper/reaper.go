// Package reaper collects the exit status of every child of the agent.
//
// As PID 1 (or a child subreaper) the agent inherits every orphan in the
// sandbox, and an orphan nobody waits for stays a zombie and holds a pid
// (29 of them once filled pids.max and blocked every fork). One loop calls
// wait4(-1) for all children; the statuses of processes the agent started
// itself are handed to whoever started them, the rest are dropped.
package reaper

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Reaper owns wait4 for the whole process. Nothing else in the agent may
// wait for children (no exec.Cmd.Wait), or it would race the loop.
type Reaper struct {
	log     *slog.Logger
	mu      sync.Mutex
	waiting map[int]chan unix.WaitStatus
}

// New makes a reaper; call Run to start reaping.
func New(log *slog.Logger) *Reaper {
	return &Reaper{log: log, waiting: map[int]chan unix.WaitStatus{}}
}

// Run reaps children until ctx ends. SIGCHLD wakes it; a slow tick covers a
// signal coalesced away while the loop was busy.
func (r *Reaper) Run(ctx context.Context) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, unix.SIGCHLD)
	defer signal.Stop(sig)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		r.reapAll()
		select {
		case <-ctx.Done():
			return
		case <-sig:
		case <-tick.C:
		}
	}
}

// Start runs start (which forks a child and returns its pid) and registers
// the pid before the reap loop can hand out its status: the loop takes the
// same lock before it looks a pid up, so a child that exits at once is still
// delivered. The returned channel receives the status exactly once.
func (r *Reaper) Start(start func() (int, error)) (int, <-chan unix.WaitStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	pid, err := start()
	if err != nil {
		return 0, nil, err
	}
	ch := make(chan unix.WaitStatus, 1)
	r.waiting[pid] = ch
	return pid, ch, nil
}

// Tracked reports the pids of started processes not yet exited.
func (r *Reaper) Tracked() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	pids := make([]int, 0, len(r.waiting))
	for pid := range r.waiting {
		pids = append(pids, pid)
	}
	return pids
}

func (r *Reaper) reapAll() {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil || pid <= 0 {
			return // ECHILD: no children; 0: none exited yet
		}
		r.mu.Lock()
		ch, ok := r.waiting[pid]
		delete(r.waiting, pid)
		r.mu.Unlock()
		if ok {
			ch <- ws
		} else if r.log != nil {
			r.log.Debug("reaped orphan", "pid", pid, "status", int(ws))
		}
	}
}
