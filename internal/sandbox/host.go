// Package sandbox is the host-side handle to sandboxes: it puts together a
// storage volume (the root filesystem), a runtime instance (the processes)
// and the agent connection, and takes them apart again.
package sandbox

import (
	"context"
	"log/slog"
	"time"

	"github.com/warrenhq/warren/internal/agentconn"
	"github.com/warrenhq/warren/internal/network"
	"github.com/warrenhq/warren/internal/procs"
	"github.com/warrenhq/warren/internal/runtime"
	"github.com/warrenhq/warren/internal/sandboxlog"
	"github.com/warrenhq/warren/internal/startgate"
	"github.com/warrenhq/warren/internal/storage"
)

// Where the agent lives inside every sandbox. The daemon bind-mounts the
// agent binary and the sandbox's socket directory there, both read-only
// (connecting to a unix socket needs no write access to its mount).
const (
	AgentBinaryPath = "/.warren/bin/warren-agent"
	AgentRunDir     = "/.warren/run"
	AgentSocketName = "agent.sock"
)

// Config is what a Host is made of.
type Config struct {
	Storage storage.Storage
	Runtime runtime.Runtime
	RunDir  string // one directory per sandbox, holding its agent socket
	// LogDir, if set, keeps one file per sandbox with PID 1's (the agent's)
	// own output. Only for debugging: root in the sandbox can write to that
	// host file through /proc/1/fd/2, so it is off unless asked for.
	LogDir      string
	AgentBinary string
	// Procs collects the output of each sandbox's background processes
	// (nil: not collected).
	Procs *procs.Manager
	// Logs keeps each sandbox's log (process output and lifecycle).
	Logs *sandboxlog.Logs
	// Network gives sandboxes that ask for one a network (nil: none can).
	Network *Networks
	Log     *slog.Logger
	// ReadyTimeout bounds how long a new or recovered sandbox's agent has
	// to connect.
	ReadyTimeout time.Duration
	// MemoryDir holds the images of sandboxes' memory: those saved with
	// snapshots and those of hibernated sandboxes.
	MemoryDir string
	// NoNewPrivileges says whether the sandboxes of a template start with
	// no_new_privs (setuid binaries such as sudo then raise nothing); it
	// is asked at every start. nil: never.
	NoNewPrivileges func(template string) bool
	// VolumeMounts returns the shared volumes a sandbox mounts (bind
	// mounts, read-write), asked at every start of it. nil: none.
	VolumeMounts func(ctx context.Context, id string) ([]runtime.Mount, error)
	// UserNS holds the host id ranges of sandboxes' user namespaces. With
	// UserNSOn every sandbox whose runtime can (Capabilities().UserNS)
	// starts in one (docs/security.md); without, new starts have none, but
	// a sandbox started with one while it was on is still recovered (its
	// agent dials from its range) and its range freed at destroy. nil:
	// neither.
	UserNS   UserNSRanges
	UserNSOn bool
	// Devices returns the host devices (CDI) a sandbox holds, asked at
	// every start of it and before its memory is saved (a sandbox holding
	// devices has none saved). nil: none.
	Devices func(ctx context.Context, id string) (*runtime.Devices, error)
	// Starts bounds the starts (create, rollback, boot) that run at once,
	// until their agent answers (launcher.admit); the others wait in order
	// (internal/startgate). nil: no bound.
	Starts *startgate.Gate
}

// UserNSRanges hands out the host id ranges of sandboxes' user namespaces.
type UserNSRanges interface {
	// Range is sandbox id's range, the same at every start until Release.
	Range(ctx context.Context, id string) (runtime.IDRange, error)
	// Lookup is sandbox id's range if it has one, allocating nothing.
	Lookup(ctx context.Context, id string) (runtime.IDRange, bool, error)
	Release(ctx context.Context, id string) error
}

// Host creates, recovers and destroys sandboxes on this machine. Each job
// is a type of its own, embedded here so that callers see one handle:
//
//   - lifecycle: create, recover, attach, stop, pause, resume, destroy,
//     reconcile (lifecycle.go, stop.go)
//   - snapshots: filesystem snapshots, rollback, diff, volume reads
//     (snapshots.go, frozen.go)
//   - memoryImages: memory snapshots, hibernate and wake (memory.go)
//   - sandboxNetworks: a sandbox's network namespace and policy (network.go)
//   - writeBackTickets: writing back a command's data before its turn
//     (writeback.go)
//   - archives: snapshots kept as streams outside the pool (archive.go)
//
// They share the pool (volumes: the storage, the snapshots being written,
// the old roots waiting to be dropped) and start processes through one
// launcher.
type Host struct {
	*lifecycle
	*snapshots
	*memoryImages
	*sandboxNetworks
	*writeBackTickets
	*archives

	pool *volumes
}

// New makes a Host of c's parts.
func New(c Config) *Host {
	pool := &volumes{st: c.Storage}
	sockets := agentSockets{runDir: c.RunDir, readyTimeout: c.ReadyTimeout, log: c.Log, userns: c.UserNS}
	images := memoryDir(c.MemoryDir)
	writeBacks := &writeBackTickets{paths: c.Storage, log: c.Log}
	if dr, ok := c.Runtime.(runtime.DirtyReader); ok {
		writeBacks.dirty = dr
	}
	nets := &sandboxNetworks{networks: c.Network, sockets: sockets}
	memory := &memoryImages{dir: images, runtime: c.Runtime, pool: pool, syncs: writeBacks, sockets: sockets, log: c.Log, devices: c.Devices}
	launch := &launcher{runtime: c.Runtime, sockets: sockets, logDir: c.LogDir, agentBinary: c.AgentBinary,
		net: nets, images: images, restorer: memory, noNewPrivileges: c.NoNewPrivileges,
		volumeMounts: c.VolumeMounts,
		userns:       c.UserNS, usernsOn: c.UserNSOn, devices: c.Devices, starts: c.Starts}
	memory.specs = launch
	return &Host{
		lifecycle: &lifecycle{pool: pool, runtime: c.Runtime, launch: launch, sockets: sockets, net: nets,
			images: images, writeBacks: writeBacks, procs: c.Procs, logs: c.Logs, logDir: c.LogDir, log: c.Log},
		snapshots: &snapshots{pool: pool, runtime: c.Runtime, writeBacks: writeBacks, launch: launch,
			sockets: sockets, images: images, log: c.Log},
		memoryImages:     memory,
		sandboxNetworks:  nets,
		writeBackTickets: writeBacks,
		archives:         newArchives(c.Storage, &pool.unsettled, c.Log),
		pool:             pool,
	}
}

// Spec says what sandbox to create.
type Spec struct {
	ID string
	// Template names the template to start from, unless Snapshot is set.
	Template string
	// Snapshot names a snapshot to start from (a fork).
	Snapshot string
	Limits   runtime.Limits
	Env      map[string]string
	// Group is the quota group the sandbox's volumes are charged to ("" =
	// none); QuotaBytes caps it (0 = no cap).
	Group      string
	QuotaBytes int64
	// Network is the sandbox's egress policy: it gets a network namespace
	// on warren's bridge. nil keeps it in a namespace of its own with only
	// loopback (no network at all).
	Network *network.Policy
	// Runtime names the runtime to start it on ("" = the host runtime's
	// default); see runtimeChooser.
	Runtime string
	// MemoryFrom names a snapshot taken with memory: the sandbox's
	// processes are restored from its image instead of started afresh
	// (the runtime must be able to, see runtime.Checkpointer).
	MemoryFrom string
	// Hibernate, with MemoryFrom, creates the sandbox hibernated: its
	// processes are not restored now but held on disk (MemoryFrom's image
	// becomes its hibernation image), and Wake restores them. A moved
	// sandbox is adopted so.
	Hibernate bool
}

func (s Spec) source() (storage.Key, string) {
	if s.Snapshot != "" {
		return snapshotKey(s.Snapshot), "snapshot"
	}
	return storage.Key{Kind: storage.KindTemplate, Name: s.Template}, "template"
}

// Sandbox is one live sandbox as the host holds it.
type Sandbox struct {
	ID     string
	Agent  *agentconn.Conn
	Status runtime.Status
}

// WaitSettled returns once every snapshot being written is, and its
// settled callback has returned (see Snapshot), and every write-back begun
// when a command ended is over: before the daemon closes the store those
// callbacks write to and unmounts the pool they hold files open in.
func (h *Host) WaitSettled() {
	h.pool.unsettled.close()
	h.writeBackTickets.close()
	h.pool.oldRoots.close()
}
