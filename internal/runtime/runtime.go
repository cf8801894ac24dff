// Package runtime defines how warren runs a sandbox's processes in isolation.
//
// The interface lives here; implementations live in subpackages (native:
// runc's libcontainer; gvisor: runsc) and pass the one conformance suite in
// runtimetest. Only internal/daemon picks an implementation.
package runtime

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// Limits are the resource limits of one sandbox.
type Limits struct {
	MemoryBytes int64 // hard memory limit; 0 = default
	CPUMillis   int64 // CPU quota in thousandths of a CPU (1000 = one CPU); 0 = default
	Pids        int64 // maximum number of tasks; 0 = default
}

// Default limits applied where a field of Limits is zero.
var DefaultLimits = Limits{
	MemoryBytes: 512 << 20,
	CPUMillis:   1000,
	Pids:        1024,
}

// WithDefaults returns l with every zero field replaced by its default.
func (l Limits) WithDefaults() Limits {
	if l.MemoryBytes == 0 {
		l.MemoryBytes = DefaultLimits.MemoryBytes
	}
	if l.CPUMillis == 0 {
		l.CPUMillis = DefaultLimits.CPUMillis
	}
	if l.Pids == 0 {
		l.Pids = DefaultLimits.Pids
	}
	return l
}

// Mount is a bind mount from the host into the sandbox.
type Mount struct {
	Source      string // host path (file or directory)
	Destination string // absolute path inside the sandbox
	ReadOnly    bool
}

// Spec is everything a runtime needs to start one sandbox.
type Spec struct {
	ID       string // validated sandbox id; also the runtime's container id
	RootFS   string // host path of the sandbox's writable root filesystem
	Hostname string
	// Init is PID 1's argv (inside the sandbox). It must reap zombies.
	Init []string
	Env  []string
	// Cwd is PID 1's working directory inside the sandbox.
	Cwd    string
	Mounts []Mount
	Limits Limits
	// LogPath, if set, receives PID 1's stdout and stderr (host path).
	LogPath string
	// NetNS is the path of a network namespace to join (made ready by the
	// caller, e.g. internal/network). Empty means a new namespace of its
	// own with only loopback: no network.
	NetNS string
	// NoNewPrivileges sets no_new_privs on PID 1, and so on every process
	// of the sandbox: setuid and file-capability binaries (sudo, su) raise
	// nothing. Without it such a binary can make a process the sandbox's
	// root, which never holds more than the capability bounding set and
	// stays under the seccomp filter (docs/security.md).
	NoNewPrivileges bool
	// UserNS, if set, runs the sandbox in a user namespace: its ids 0 to
	// Size-1 are HostID to HostID+Size-1 on the host, so its root is an
	// unprivileged uid outside. Files keep their in-sandbox ids on disk
	// (the root filesystem and the mounts are idmapped, not chown'd).
	// Runtimes that cannot do it refuse the spec (ErrUnsupported).
	UserNS *IDRange
	// Devices, if set, are host devices (CDI) the sandbox gets.
	Devices *Devices
}

// Devices are the host devices a sandbox gets: their CDI names and the
// edits that add them to the sandbox's OCI runtime spec (device nodes,
// device cgroup rules, mounts, env).
type Devices struct {
	Names []string
	// Apply is not serialised: a spec written down (a test's, a
	// runtime's record) names the devices, and its reader asks again.
	Apply func(*specs.Spec) error `json:"-"`
}

// Env is base with the devices' env edits applied, for a runtime that
// gives PID 1 its environment other than through the OCI spec.
func (d *Devices) Env(base []string) ([]string, error) {
	scratch := &specs.Spec{Process: &specs.Process{Env: append([]string(nil), base...)}, Linux: &specs.Linux{}}
	if err := d.Apply(scratch); err != nil {
		return nil, err
	}
	return scratch.Process.Env, nil
}

// IDRange is a block of host uids and gids (the same numbers for both)
// that a sandbox's ids 0..Size-1 map to.
type IDRange struct {
	HostID uint32
	Size   uint32
}

// State is the observed state of a sandbox's processes.
type State string

const (
	StateRunning State = "running"
	StatePaused  State = "paused"
	StateStopped State = "stopped" // PID 1 exited; resources may remain until Destroy
)

// Status describes one sandbox as the runtime sees it.
type Status struct {
	ID      string
	State   State
	InitPID int // host pid of the sandbox's PID 1 (0 when stopped)
	Created time.Time
}

// Capabilities say which optional features a runtime has. Callers branch on
// these, never on a runtime's name.
type Capabilities struct {
	Pause          bool // freeze and thaw all processes
	MemorySnapshot bool // checkpoint a sandbox's memory
	Network        bool // per-sandbox network namespace
	UserNS         bool // Spec.UserNS: a host user namespace per sandbox
	// DeviceClasses are the CDI device classes (vendor.com/class) the
	// runtime can pass through; nil: any.
	DeviceClasses []string
}

// Runtime starts, finds and destroys sandboxes.
//
// Sandboxes outlive the daemon: a runtime keeps whatever it needs to find a
// sandbox again on disk, and Recover reattaches to it after a restart.
type Runtime interface {
	Name() string
	Capabilities() Capabilities
	// Start creates the sandbox described by spec and starts its PID 1.
	// On error nothing is left behind (no cgroup, no state, no process).
	Start(ctx context.Context, spec Spec) (Status, error)
	// Recover reattaches to a sandbox started by an earlier daemon.
	// It returns ErrNotFound if the runtime knows nothing of id.
	Recover(ctx context.Context, id string) (Status, error)
	// Status reports a sandbox's current state.
	Status(ctx context.Context, id string) (Status, error)
	// Pause freezes every process of the sandbox; Resume thaws them.
	// Runtimes without Capabilities().Pause return ErrUnsupported.
	Pause(ctx context.Context, id string) error
	Resume(ctx context.Context, id string) error
	// Destroy kills every process of the sandbox and removes the runtime's
	// resources (cgroups, state). Destroying an unknown id returns
	// ErrNotFound; destroying twice is safe.
	Destroy(ctx context.Context, id string) error
	// List returns the ids of every sandbox the runtime has state for,
	// including ones no record names (the daemon reconciles them).
	List(ctx context.Context) ([]string, error)
}

// Checkpointer is implemented by runtimes with Capabilities().MemorySnapshot:
// they save a sandbox's memory and processes and start sandboxes from such
// a checkpoint.
type Checkpointer interface {
	// Checkpoint writes the memory and processes of the running or paused
	// sandbox id into dir, a directory it makes (its parent must exist; dir
	// must not). The sandbox stays as it was unless stop is set: then its
	// processes end once saved (Destroy still removes what remains).
	Checkpoint(ctx context.Context, id, dir string, stop bool) (CheckpointInfo, error)
	// Restore starts the sandbox described by spec with the processes and
	// memory saved in dir instead of running spec.Init. spec.RootFS must
	// hold the files as they were when the checkpoint was taken (the same
	// tree, or a snapshot of it). The ID may differ from the checkpointed
	// sandbox's; the mounts' destinations must be the same.
	// On error nothing is left behind, as with Start.
	Restore(ctx context.Context, spec Spec, dir string) (Status, error)
}

// CheckpointInfo describes a checkpoint that was written.
type CheckpointInfo struct {
	Bytes    int64         // size of the image on disk
	Duration time.Duration // how long the sandbox was stopped for it
}

// Validate checks what every runtime needs of a spec: absolute host paths,
// a PID 1, mounts that do not cover the root, and sane limits.
func (spec Spec) Validate() error {
	if !filepath.IsAbs(spec.RootFS) {
		return fmt.Errorf("root filesystem %q must be an absolute host path", spec.RootFS)
	}
	if len(spec.Init) == 0 {
		return fmt.Errorf("init command is empty; give PID 1's argv")
	}
	if spec.Cwd != "" && !filepath.IsAbs(spec.Cwd) {
		return fmt.Errorf("working directory %q must be absolute", spec.Cwd)
	}
	if spec.NetNS != "" && !filepath.IsAbs(spec.NetNS) {
		return fmt.Errorf("network namespace %q must be an absolute host path", spec.NetNS)
	}
	for _, m := range spec.Mounts {
		if !filepath.IsAbs(m.Source) {
			return fmt.Errorf("mount source %q must be an absolute host path", m.Source)
		}
		if !filepath.IsAbs(m.Destination) || filepath.Clean(m.Destination) == "/" {
			return fmt.Errorf("mount destination %q must be an absolute path other than /", m.Destination)
		}
	}
	if u := spec.UserNS; u != nil && (u.HostID == 0 || u.Size == 0 || uint64(u.HostID)+uint64(u.Size) > 1<<32-1) {
		return fmt.Errorf("user namespace range %d+%d must be non-empty, start above 0 and end below 2^32-1", u.HostID, u.Size)
	}
	lim := spec.Limits
	if lim.MemoryBytes < 0 || lim.CPUMillis < 0 || lim.Pids < 0 {
		return fmt.Errorf("limits must not be negative (memory %d, cpu %d, pids %d)", lim.MemoryBytes, lim.CPUMillis, lim.Pids)
	}
	if lim.CPUMillis > 0 && lim.CPUMillis < 10 {
		// The kernel's smallest CFS quota is 1 ms per 100 ms period.
		return fmt.Errorf("cpu limit %d millicpus is below the minimum of 10", lim.CPUMillis)
	}
	return nil
}
