package procs

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"sort"
	"sync"
	"time"

	"connectrpc.com/connect"

	agentv1 "github.com/warrenhq/warren/api/gen/warren/agent/v1"
)

const (
	// flushEvery is how often a changed index is written: after a kill -9
	// at most this much progress is re-sent by the agent.
	flushEvery = 100 * time.Millisecond
	// retryMin and retryMax space reconnections of WatchOutput.
	retryMin = 100 * time.Millisecond
	retryMax = 2 * time.Second
	// Bounds on what the agent may make us store per process.
	maxTag     = 128
	maxArgs    = 64
	maxArg     = 1024
	maxString  = 4096
	maxErrText = 4096
)

// Collector holds one sandbox's process records and output.
type Collector struct {
	id    string
	dir   string
	agent Agent
	opts  Options
	log   *slog.Logger

	mu       sync.Mutex
	instance string
	procs    map[int32]*proc
	synced   bool          // caught up with the agent since the last (re)connect
	changed  chan struct{} // closed and replaced on every change
	dirty    bool
	stopped  bool // readers waiting for more output give up

	cancel context.CancelFunc
	done   chan struct{}
}

type proc struct {
	rec      procRecord
	out, err *fileRing
}

func (p *proc) id() ProcessID { return ProcessID{PID: p.rec.PID, Seq: p.rec.Seq, Tag: p.rec.Tag} }

func newCollector(id, dir string, agent Agent, opts Options) *Collector {
	return &Collector{
		id: id, dir: dir, agent: agent, opts: opts,
		log:     opts.Log.With("sandbox", id),
		procs:   map[int32]*proc{},
		changed: make(chan struct{}),
		done:    make(chan struct{}),
	}
}

func (c *Collector) start() {
	ix, err := loadIndex(c.dir)
	if err != nil {
		c.log.Warn("process index", "err", err)
	}
	c.instance = ix.Instance
	for _, r := range ix.Processes {
		p := &proc{rec: r}
		p.out = &fileRing{path: ringPath(c.dir, r.PID, r.Seq, "out"), size: c.opts.RingBytes, start: r.Stdout.Start, end: r.Stdout.End}
		p.err = &fileRing{path: ringPath(c.dir, r.PID, r.Seq, "err"), size: c.opts.RingBytes, start: r.Stderr.Start, end: r.Stderr.End}
		c.procs[r.PID] = p
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go c.run(ctx)
}

// stop ends collection and writes the index a last time.
func (c *Collector) stop() {
	c.cancel()
	<-c.done
	c.mu.Lock()
	c.stopped = true
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

func (c *Collector) run(ctx context.Context) {
	defer close(c.done)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); c.flushLoop(ctx) }()
	defer wg.Wait()
	delay := retryMin
	for ctx.Err() == nil {
		gotData, err := c.watch(ctx)
		if ctx.Err() != nil {
			return
		}
		if gotData {
			delay = retryMin
		}
		c.log.Debug("process output stream ended; reconnecting", "err", err, "in", delay)
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, retryMax)
	}
}

// watch runs one WatchOutput stream until it breaks.
func (c *Collector) watch(ctx context.Context) (bool, error) {
	req := &agentv1.WatchOutputRequest{From: map[int32]*agentv1.StreamOffsets{}}
	c.mu.Lock()
	req.Instance = c.instance
	for pid, p := range c.procs {
		req.From[pid] = &agentv1.StreamOffsets{Seq: p.rec.Seq, Stdout: p.out.end, Stderr: p.err.end}
	}
	c.mu.Unlock()
	stream, err := c.agent.Process().WatchOutput(ctx, connect.NewRequest(req))
	if err != nil {
		return false, err
	}
	defer stream.Close()
	got := false
	for stream.Receive() {
		got = true
		c.apply(stream.Msg())
	}
	c.mu.Lock()
	c.synced = false
	c.mu.Unlock()
	return got, stream.Err()
}

// apply takes one event from the agent into the records.
func (c *Collector) apply(ev *agentv1.ProcessEvent) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch e := ev.Event.(type) {
	case *agentv1.ProcessEvent_Hello:
		inst := clip(e.Hello.GetInstance(), maxTag)
		if inst != c.instance {
			// A new agent (the sandbox restarted, e.g. a rollback): the
			// processes the old one ran are gone, pids mean new things.
			if c.instance != "" {
				c.log.Info("sandbox agent restarted; dropping its old process records")
			}
			for pid := range c.procs {
				c.dropLocked(pid)
			}
			c.instance = inst
		}
		c.synced = false
	case *agentv1.ProcessEvent_Started:
		c.startedLocked(e.Started)
	case *agentv1.ProcessEvent_Output:
		if c.opts.OnOutput != nil {
			c.opts.OnOutput(c.id)
		}
		o := e.Output
		p := c.procs[o.GetPid()]
		if p == nil || p.rec.Seq != o.GetSeq() {
			return
		}
		r, stderr := p.out, o.GetStream() == agentv1.Stream_STREAM_STDERR
		if stderr {
			r = p.err
		}
		at, fresh, err := r.write(o.GetOffset(), o.GetData())
		if err != nil {
			c.log.Warn("store process output", "pid", o.GetPid(), "err", err)
		}
		if c.opts.Sink != nil && len(fresh) > 0 {
			c.opts.Sink.Output(c.id, p.id(), stderr, at, fresh)
		}
	case *agentv1.ProcessEvent_Exited:
		x := e.Exited
		p := c.procs[x.GetPid()]
		if p == nil || p.rec.Seq != x.GetSeq() || p.rec.Exit != nil {
			return
		}
		p.rec.Exit = &Exit{
			ExitCode: x.GetExited().GetExitCode(),
			Signal:   clip(x.GetExited().GetSignal(), maxTag),
			TimedOut: x.GetExited().GetTimedOut(),
			Error:    clip(x.GetExited().GetError(), maxErrText),
		}
		p.rec.EndedAt = time.UnixMilli(x.GetEndedAtUnixMs())
		p.rec.SeenExit = time.Now()
		if c.opts.Sink != nil {
			c.opts.Sink.Exited(c.id, p.id(), *p.rec.Exit)
		}
	case *agentv1.ProcessEvent_Synced:
		c.synced = true
	default:
		return
	}
	c.dirty = true
	close(c.changed)
	c.changed = make(chan struct{})
}

func (c *Collector) startedLocked(in *agentv1.ProcessInfo) {
	pid, seq := in.GetPid(), in.GetSeq()
	if pid <= 0 {
		return
	}
	if p := c.procs[pid]; p != nil {
		if p.rec.Seq == seq {
			return
		}
		c.dropLocked(pid) // the kernel reused the pid
	}
	if len(c.procs) >= c.opts.MaxProcesses && !c.evictLocked() {
		c.log.Warn("too many processes to keep the output of; ignoring one", "pid", pid, "max", c.opts.MaxProcesses)
		return
	}
	argv := in.GetArgv()
	if len(argv) > maxArgs {
		argv = argv[:maxArgs]
	}
	rec := procRecord{
		PID: pid, Seq: seq,
		Tag:       clip(in.GetTag(), maxTag),
		Cwd:       clip(in.GetCwd(), maxString),
		User:      clip(in.GetUser(), maxString),
		StartedAt: time.UnixMilli(in.GetStartedAtUnixMs()),
	}
	for _, a := range argv {
		rec.Argv = append(rec.Argv, clip(a, maxArg))
	}
	p := &proc{
		rec: rec,
		out: &fileRing{path: ringPath(c.dir, pid, seq, "out"), size: c.opts.RingBytes},
		err: &fileRing{path: ringPath(c.dir, pid, seq, "err"), size: c.opts.RingBytes},
	}
	c.procs[pid] = p
	if c.opts.Sink != nil {
		c.opts.Sink.Started(c.id, p.id(), rec.Argv)
	}
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		c.log.Warn("make process output dir", "err", err)
	}
}

// evictLocked drops the exited process that exited first; false when every
// process still runs.
func (c *Collector) evictLocked() bool {
	var oldest *proc
	for _, p := range c.procs {
		if p.rec.Exit != nil && (oldest == nil || p.rec.SeenExit.Before(oldest.rec.SeenExit)) {
			oldest = p
		}
	}
	if oldest == nil {
		return false
	}
	c.dropLocked(oldest.rec.PID)
	return true
}

func (c *Collector) dropLocked(pid int32) {
	p := c.procs[pid]
	if p == nil {
		return
	}
	delete(c.procs, pid)
	for _, path := range []string{p.out.path, p.err.path} {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			c.log.Warn("remove process output", "err", err)
		}
	}
	c.dirty = true
}

// flushLoop writes the index when it changed and forgets processes that
// exited more than the TTL ago.
func (c *Collector) flushLoop(ctx context.Context) {
	t := time.NewTicker(flushEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			c.flush()
			return
		case <-t.C:
			c.expire()
			c.flush()
		}
	}
}

func (c *Collector) expire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for pid, p := range c.procs {
		if p.rec.Exit != nil && time.Since(p.rec.SeenExit) > c.opts.ExitedTTL {
			c.dropLocked(pid)
		}
	}
}

func (c *Collector) flush() {
	c.mu.Lock()
	if !c.dirty {
		c.mu.Unlock()
		return
	}
	ix := index{Instance: c.instance}
	for _, p := range c.procs {
		r := p.rec
		r.Stdout = span{p.out.start, p.out.end}
		r.Stderr = span{p.err.start, p.err.end}
		ix.Processes = append(ix.Processes, r)
	}
	c.dirty = false
	c.mu.Unlock()
	sort.Slice(ix.Processes, func(i, j int) bool { return ix.Processes[i].Seq < ix.Processes[j].Seq })
	if err := saveIndex(c.dir, ix); err != nil {
		c.log.Warn("save process index", "err", err)
		c.mu.Lock()
		c.dirty = true
		c.mu.Unlock()
	}
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
