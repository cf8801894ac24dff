package procs

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
)

const (
	// readChunk bounds one output event handed to a reader.
	readChunk = 64 << 10
	// syncWait bounds how long List waits for a (re)connected agent's
	// catch-up, so a list right after a daemon restart is complete.
	syncWait = 2 * time.Second
)

// Process describes one background process as the host knows it.
type Process struct {
	PID       int32
	Seq       uint64
	Tag       string
	Argv      []string
	Cwd       string
	User      string
	StartedAt time.Time
	EndedAt   time.Time // zero while running
	Exit      *Exit     // nil while running
	// Stdout and Stderr are the stream ranges kept: [start, end).
	StdoutStart, StdoutEnd uint64
	StderrStart, StderrEnd uint64
}

// Running reports whether the process has not exited.
func (p Process) Running() bool { return p.Exit == nil }

func (p *proc) describe() Process {
	r := p.rec
	return Process{
		PID: r.PID, Seq: r.Seq, Tag: r.Tag, Argv: r.Argv, Cwd: r.Cwd, User: r.User,
		StartedAt: r.StartedAt, EndedAt: r.EndedAt, Exit: r.Exit,
		StdoutStart: p.out.start, StdoutEnd: p.out.end,
		StderrStart: p.err.start, StderrEnd: p.err.end,
	}
}

// waitSynced waits until the collector has caught up with the agent, or
// syncWait passes, or ctx ends.
func (c *Collector) waitSynced(ctx context.Context) {
	t := time.NewTimer(syncWait)
	defer t.Stop()
	for {
		c.mu.Lock()
		synced, changed := c.synced, c.changed
		c.mu.Unlock()
		if synced {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			return
		case <-changed:
		}
	}
}

// List returns the processes in start order.
func (c *Collector) List(ctx context.Context) []Process {
	c.waitSynced(ctx)
	c.mu.Lock()
	out := make([]Process, 0, len(c.procs))
	for _, p := range c.procs {
		out = append(out, p.describe())
	}
	c.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out
}

// Get finds a process by "pid" or "tag": a tag names the running process
// that has it, else the last one started.
func (c *Collector) Get(ctx context.Context, ref string) (Process, error) {
	c.waitSynced(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.lookupLocked(ref)
	if p == nil {
		return Process{}, fmt.Errorf("sandbox %s has no background process %q (see `warren ps %s`): %w", c.id, ref, c.id, errdefs.ErrNotFound)
	}
	return p.describe(), nil
}

func (c *Collector) lookupLocked(ref string) *proc {
	if n, err := strconv.ParseInt(ref, 10, 32); err == nil && n > 0 {
		return c.procs[int32(n)]
	}
	var best *proc
	for _, p := range c.procs {
		if p.rec.Tag != ref {
			continue
		}
		if best == nil || preferred(p, best) {
			best = p
		}
	}
	return best
}

// WaitKnown waits until the collector has heard of process pid/seq (just
// started through the agent), for at most d.
func (c *Collector) WaitKnown(ctx context.Context, pid int32, seq uint64, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		c.mu.Lock()
		p, changed := c.procs[pid], c.changed
		c.mu.Unlock()
		if p != nil && p.rec.Seq == seq {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return false
		case <-changed:
		}
	}
}

// Event is one piece of a process's output, or (Exit set) its end.
type Event struct {
	Stream string // "stdout" or "stderr"
	Offset uint64
	Data   []byte
	Exit   *Exit
}

// Follow sends p's output from the given offsets (or the oldest byte kept),
// then, with follow, what it prints next, and finally its exit. Without
// follow it stops when it has sent what is kept. It returns when the
// process is forgotten (its sandbox restarted) without an exit event.
func (c *Collector) Follow(ctx context.Context, p Process, stdoutFrom, stderrFrom uint64, follow bool, emit func(Event) error) error {
	offs := map[string]*uint64{"stdout": &stdoutFrom, "stderr": &stderrFrom}
	for {
		c.mu.Lock()
		cur, changed := c.procs[p.PID], c.changed
		if c.stopped {
			c.mu.Unlock()
			return fmt.Errorf("sandbox %s was deleted or the daemon is stopping: %w", c.id, errdefs.ErrUnavailable)
		}
		if cur == nil || cur.rec.Seq != p.Seq {
			c.mu.Unlock()
			return nil
		}
		exit := cur.rec.Exit
		var evs []Event
		var err error
		for _, s := range []struct {
			name string
			r    *fileRing
		}{{"stdout", cur.out}, {"stderr", cur.err}} {
			var data []byte
			var at uint64
			data, at, err = s.r.read(*offs[s.name], readChunk)
			if err != nil {
				break
			}
			if len(data) > 0 {
				evs = append(evs, Event{Stream: s.name, Offset: at, Data: data})
				*offs[s.name] = at + uint64(len(data))
			}
		}
		c.mu.Unlock()
		if err != nil {
			return err
		}
		for _, ev := range evs {
			if err := emit(ev); err != nil {
				return err
			}
		}
		if len(evs) > 0 {
			continue // more may be kept already
		}
		// All kept output sent. The agent sends a process's exit after all
		// of its output, so an exit seen before this pass is final.
		if exit != nil {
			return emit(Event{Exit: exit})
		}
		if !follow {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

// preferred says whether a matches a tag better than b: a running process
// first, then the newest.
func preferred(a, b *proc) bool {
	aRunning, bRunning := a.rec.Exit == nil, b.rec.Exit == nil
	if aRunning != bRunning {
		return aRunning
	}
	return a.rec.Seq > b.rec.Seq
}
