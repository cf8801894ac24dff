package process

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/api/gen/process"
	agentv1 "github.com/warrenhq/warren/api/gen/warren/agent/v1"
)

const (
	// RingBytes is how much of each stream of a background process the agent
	// keeps in memory: output made while the daemon is away survives up to
	// this much, and the daemon's own (larger) ring keeps the rest.
	RingBytes = 1 << 20
	// ExitedTTL is how long an exited background process stays listable.
	ExitedTTL = 10 * time.Minute
	// maxTracked bounds the registry; past it the oldest exited processes
	// are forgotten early, and with none to forget Start is refused.
	maxTracked = 1024
)

// registry holds the background processes. Producers (pipe readers, the
// reaper) never block on consumers: they write into the rings and wake
// every stream through `changed`, and each stream catches up at its own pace.
type registry struct {
	instance string
	now      func() time.Time

	mu      sync.Mutex
	seq     uint64
	procs   map[int]*proc
	changed chan struct{} // closed and replaced on every change
}

// proc is one background process. Its fields after stdin are guarded by the
// registry's lock.
type proc struct {
	pid       int
	seq       uint64
	tag       string
	argv      []string
	cwd       string
	user      string
	startedAt time.Time

	stdinPipe *os.File    // never changes: lets a close cut a blocked write short
	stdinMu   sync.Mutex  // serialises writes and the close
	stdin     *os.File    // nil once closed
	stdinOpen atomic.Bool // read without stdinMu, which a slow write holds

	out, err ring
	exited   *agentv1.Exited // set once exited and its pipes are drained
	endedAt  time.Time
	status   unix.WaitStatus    // the raw status, for E2B's end event
	feeds    map[*feed]struct{} // E2B streams following the output live
	// ended is made by add and closed with exited set; status may be read
	// without the lock once it is closed.
	ended chan struct{}

	// For E2B's process API (envd.go), set before add and never changed:
	// what the process was started with, and its terminal's master when it
	// has one. Both are nil for processes warren's own API started, which
	// E2B's API lists and reaches all the same.
	config *process.ProcessConfig
	tty    *os.File
}

func newRegistry() *registry {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return &registry{
		instance: hex.EncodeToString(b),
		now:      time.Now,
		procs:    map[int]*proc{},
		changed:  make(chan struct{}),
	}
}

// notifyLocked wakes every stream; call with mu held.
func (g *registry) notifyLocked() {
	close(g.changed)
	g.changed = make(chan struct{})
}

// pruneLocked forgets processes that exited more than ExitedTTL ago, and
// the oldest exited ones while the registry is over its bound.
func (g *registry) pruneLocked() {
	now := g.now()
	var exited []*proc
	for pid, p := range g.procs {
		if p.exited == nil {
			continue
		}
		if now.Sub(p.endedAt) > ExitedTTL {
			delete(g.procs, pid)
			continue
		}
		exited = append(exited, p)
	}
	if len(g.procs) < maxTracked {
		return
	}
	sort.Slice(exited, func(i, j int) bool { return exited[i].seq < exited[j].seq })
	for _, p := range exited {
		if len(g.procs) < maxTracked {
			break
		}
		delete(g.procs, p.pid)
	}
}

// reserve checks that a process with this tag may start.
func (g *registry) reserve(tag string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pruneLocked()
	if len(g.procs) >= maxTracked {
		return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("%d background processes are running: stop some first", len(g.procs)))
	}
	if tag == "" {
		return nil
	}
	for _, p := range g.procs {
		if p.tag == tag && p.exited == nil {
			return connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("a running process (pid %d) already has tag %q", p.pid, tag))
		}
	}
	return nil
}

// add registers a started process. A pid the kernel reused replaces the
// exited process that had it.
func (g *registry) add(p *proc) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.seq++
	p.seq = g.seq
	p.out, p.err = newRing(RingBytes), newRing(RingBytes)
	p.ended = make(chan struct{})
	g.procs[p.pid] = p
	g.notifyLocked()
}

func (g *registry) appendOutput(p *proc, stream agentv1.Stream, data []byte) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if stream == agentv1.Stream_STREAM_STDERR {
		p.err.write(data)
	} else {
		p.out.write(data)
	}
	g.notifyLocked()
}

func (g *registry) markExited(p *proc, e *agentv1.Exited, ws unix.WaitStatus) {
	g.mu.Lock()
	defer g.mu.Unlock()
	p.exited = e
	p.status = ws
	p.endedAt = g.now()
	close(p.ended)
	g.notifyLocked()
}

// lookup finds a process by pid, or by tag: the running one with it, else
// the one that started last.
func (g *registry) lookup(ref *agentv1.ProcessRef) (*proc, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pruneLocked()
	if ref.GetPid() != 0 {
		if p := g.procs[int(ref.GetPid())]; p != nil {
			return p, nil
		}
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("no background process with pid %d", ref.GetPid()))
	}
	if ref.GetTag() == "" {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("name the process by pid or tag"))
	}
	var best *proc
	for _, p := range g.procs {
		if p.tag != ref.GetTag() {
			continue
		}
		if best == nil || preferred(p, best) {
			best = p
		}
	}
	if best == nil {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("no background process with tag %q", ref.GetTag()))
	}
	return best, nil
}

// snapshot returns the processes in start order and the channel that is
// closed on the next change (taken first, so no change is missed).
func (g *registry) snapshot() ([]*proc, <-chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]*proc, 0, len(g.procs))
	for _, p := range g.procs {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].seq < out[j].seq })
	return out, g.changed
}

// info describes p.
func (g *registry) info(p *proc) *agentv1.ProcessInfo {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.infoLocked(p)
}

func (g *registry) infoLocked(p *proc) *agentv1.ProcessInfo {
	in := &agentv1.ProcessInfo{
		Pid:             int32(p.pid),
		Seq:             p.seq,
		Tag:             p.tag,
		Argv:            p.argv,
		Cwd:             p.cwd,
		User:            p.user,
		State:           agentv1.ProcessState_PROCESS_STATE_RUNNING,
		StartedAtUnixMs: p.startedAt.UnixMilli(),
		StdoutEnd:       p.out.end,
		StderrEnd:       p.err.end,
	}
	if p.exited != nil {
		in.State = agentv1.ProcessState_PROCESS_STATE_EXITED
		in.Exited = p.exited
		in.EndedAtUnixMs = p.endedAt.UnixMilli()
	}
	in.StdinOpen = p.stdinOpen.Load()
	return in
}

// read copies output of p past off (see ring.read).
func (g *registry) read(p *proc, stream agentv1.Stream, off uint64, limit int) ([]byte, uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if stream == agentv1.Stream_STREAM_STDERR {
		return p.err.read(off, limit)
	}
	return p.out.read(off, limit)
}

// exitOf returns p's exit and final offsets once it has exited.
func (g *registry) exitOf(p *proc) *agentv1.ProcessExited {
	g.mu.Lock()
	defer g.mu.Unlock()
	if p.exited == nil {
		return nil
	}
	return &agentv1.ProcessExited{
		Pid: int32(p.pid), Seq: p.seq, Exited: p.exited,
		EndedAtUnixMs: p.endedAt.UnixMilli(), StdoutEnd: p.out.end, StderrEnd: p.err.end,
	}
}

// preferred says whether a is a better match for a tag than b: a running
// process first, then the newest.
func preferred(a, b *proc) bool {
	aRunning, bRunning := a.exited == nil, b.exited == nil
	if aRunning != bRunning {
		return aRunning
	}
	return a.seq > b.seq
}
