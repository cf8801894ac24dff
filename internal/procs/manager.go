// Package procs keeps the output of every sandbox's background processes on
// the host. One collector per sandbox holds the agent's WatchOutput stream
// open and appends what it carries to bounded per-process ring files under
// <data-dir>/procs/<sandbox id>/, with a small index, so that the output
// and the list of processes survive client disconnects and daemon restarts
// (the collector resumes from the persisted offsets; the agent keeps what
// was printed meanwhile in its own smaller ring).
//
// The directory is outside the sandbox's socket directory on purpose: that
// one is mounted into the sandbox. Everything the agent sends is untrusted:
// counts, sizes and strings are bounded here.
package procs

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/warrenhq/warren/api/gen/warren/agent/v1/agentv1connect"
	"github.com/warrenhq/warren/internal/ids"
)

const (
	// DefaultRingBytes bounds each stream of each process on disk.
	DefaultRingBytes = 8 << 20
	// DefaultMaxProcesses bounds the processes kept per sandbox; past it the
	// oldest exited ones are dropped, and new ones are not recorded.
	DefaultMaxProcesses = 128
	// DefaultExitedTTL is how long an exited process stays listable.
	DefaultExitedTTL = 10 * time.Minute
)

// Agent is the part of a sandbox's agent connection a collector uses;
// *agentconn.Conn is one.
type Agent interface {
	Process() agentv1connect.ProcessServiceClient
}

// Options configure a Manager.
type Options struct {
	Dir          string // one subdirectory per sandbox
	RingBytes    int64
	MaxProcesses int
	ExitedTTL    time.Duration
	Log          *slog.Logger
	// OnOutput, if set, is called (from the collector's goroutine) when a
	// sandbox's processes print something: the session counts it as
	// activity against the idle timeout.
	OnOutput func(sandboxID string)
	// Sink, if set, hears of every process's start, new output and exit.
	// After a daemon restart the agent replays what the collector's index
	// had not saved yet, so a sink can hear of some a second time.
	Sink Sink
}

// ProcessID names a process of a sandbox for a Sink: Seq tells apart two
// processes that had the same pid (0: the process is not one the agent
// replays, such as a foreground exec).
type ProcessID struct {
	PID int32
	Seq uint64
	Tag string
}

// Sink receives the life of a sandbox's processes, from the collector's
// goroutine, in order.
type Sink interface {
	Started(sandboxID string, p ProcessID, argv []string)
	// Output is the stream's bytes from offset off.
	Output(sandboxID string, p ProcessID, stderr bool, off uint64, data []byte)
	Exited(sandboxID string, p ProcessID, exit Exit)
}

// Manager runs one collector per attached sandbox. A nil *Manager does
// nothing, so hooks can call it unconditionally.
type Manager struct {
	opts Options
	mu   sync.Mutex
	cols map[string]*Collector
}

// New returns a manager storing under opts.Dir.
func New(opts Options) *Manager {
	if opts.RingBytes <= 0 {
		opts.RingBytes = DefaultRingBytes
	}
	if opts.MaxProcesses <= 0 {
		opts.MaxProcesses = DefaultMaxProcesses
	}
	if opts.ExitedTTL <= 0 {
		opts.ExitedTTL = DefaultExitedTTL
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	return &Manager{opts: opts, cols: map[string]*Collector{}}
}

func (m *Manager) dir(id string) string { return filepath.Join(m.opts.Dir, id) }

// Attach starts collecting a sandbox's process output over agent (replacing
// a collector already running for it), resuming from what is on disk.
func (m *Manager) Attach(id string, agent Agent) {
	if m == nil || agent == nil {
		return
	}
	if err := ids.Validate("sandbox id", id); err != nil {
		m.opts.Log.Warn("not collecting process output", "sandbox", id, "err", err)
		return
	}
	c := newCollector(id, m.dir(id), agent, m.opts)
	m.mu.Lock()
	old := m.cols[id]
	m.cols[id] = c
	m.mu.Unlock()
	if old != nil {
		old.stop()
	}
	c.start()
}

// Get returns the collector of an attached sandbox.
func (m *Manager) Get(id string) (*Collector, bool) {
	if m == nil {
		return nil, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.cols[id]
	return c, ok
}

func (m *Manager) detach(id string) {
	m.mu.Lock()
	c := m.cols[id]
	delete(m.cols, id)
	m.mu.Unlock()
	if c != nil {
		c.stop()
	}
}

// Remove stops a sandbox's collector and deletes its output. Removing an
// unknown sandbox is fine.
func (m *Manager) Remove(id string) error {
	if m == nil {
		return nil
	}
	if err := ids.Validate("sandbox id", id); err != nil {
		return fmt.Errorf("remove process output: %w", err)
	}
	m.detach(id)
	if err := os.RemoveAll(m.dir(id)); err != nil {
		return fmt.Errorf("remove process output of %s: %w", id, err)
	}
	return nil
}

// Reconcile deletes the output of every sandbox not in keep.
func (m *Manager) Reconcile(keep map[string]bool) error {
	if m == nil {
		return nil
	}
	entries, err := os.ReadDir(m.opts.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list process output: %w", err)
	}
	var errs []error
	for _, e := range entries {
		if keep[e.Name()] {
			continue
		}
		if err := m.Remove(e.Name()); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Close stops every collector, leaving their output for the next daemon.
func (m *Manager) Close() {
	if m == nil {
		return
	}
	m.mu.Lock()
	cols := m.cols
	m.cols = map[string]*Collector{}
	m.mu.Unlock()
	for _, c := range cols {
		c.stop()
	}
}
