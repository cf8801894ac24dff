// Package session decides what happens to sandboxes: it owns their records,
// their lifecycle state machine, limits, teams and timeouts. It makes no
// syscalls; the sandbox.Host it is given does the work.
package session

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/warrenhq/warren/internal/agentconn"
	"github.com/warrenhq/warren/internal/network"
	"github.com/warrenhq/warren/internal/runtime"
	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/storage"
	"github.com/warrenhq/warren/internal/store"
)

// Host is what the manager needs of the machine; *sandbox.Host is the real
// one.
type Host interface {
	Create(ctx context.Context, spec sandbox.Spec) (*sandbox.Sandbox, error)
	Recover(ctx context.Context, id string) (*sandbox.Sandbox, error)
	Destroy(ctx context.Context, id string, conn *agentconn.Conn) error
	Reconcile(ctx context.Context, keep map[string]bool) error
	Alive(ctx context.Context, id string) (bool, error)
	Pause(ctx context.Context, id string) error
	UpdateLimits(ctx context.Context, id string, l runtime.Limits) error
	Stop(ctx context.Context, id string, grace time.Duration, conn *agentconn.Conn) (bool, error)
	PrimeFirstCommand(ctx context.Context, sb *sandbox.Sandbox) error
	SetEnv(ctx context.Context, sb *sandbox.Sandbox, env map[string]string) error
	SetQuota(ctx context.Context, group string, bytes int64) error
	Resume(ctx context.Context, id string, conn *agentconn.Conn) error
	Hibernate(ctx context.Context, id string) (runtime.CheckpointInfo, error)
	Wake(ctx context.Context, spec sandbox.Spec, conn *agentconn.Conn) (time.Duration, error)
	IsHibernated(id string) bool
	PowerOff(ctx context.Context, id string) error
	ColdBoot(ctx context.Context, spec sandbox.Spec, conn *agentconn.Conn) (time.Duration, error)
	Attach(ctx context.Context, id string) (*sandbox.Sandbox, error)

	Snapshot(ctx context.Context, id, snapID, group string, settled func(storage.Info, error)) (sandbox.SnapshotResult, error)
	SnapshotStopped(ctx context.Context, id, snapID, group string) (sandbox.SnapshotResult, error)
	WaitSettled()
	SnapshotMemory(ctx context.Context, id, snapID, group string, wasPaused bool, conn *agentconn.Conn) (sandbox.SnapshotResult, int64, error)
	MemoryImage(snapID string) (runtimeName string, ok bool)
	CanSaveMemory(runtimeName string) error
	DeleteSnapshot(ctx context.Context, snapID string) error
	Rollback(ctx context.Context, spec sandbox.Spec, snapID string, conn *agentconn.Conn) error
	Diff(ctx context.Context, from, to string, toLive bool) ([]storage.Change, error)
	ReadVolumeFile(id string, live bool, path string, limit int64) ([]byte, bool, error)
	ReconcileSnapshots(ctx context.Context, keep map[string]bool) error
	HasSnapshot(ctx context.Context, snapID string) bool
	SnapshotInfo(ctx context.Context, snapID string) (storage.Info, error)
	CommandStarted(id string)
	CommandEnded(id string)
	GroupUsage(ctx context.Context, group string) (used, limit int64, err error)

	NetworkAvailable() error
	UpdateNetwork(ctx context.Context, id string, p network.Policy) error
	AdoptNetwork(ctx context.Context, id string, p network.Policy) error

	CanArchive() bool
	ArchiveSnapshot(ctx context.Context, snapID, parentID string) (string, error)
	RestoreSnapshot(ctx context.Context, snapID, baseID string, paths []string) error
	HasArchive(path string) bool
	RemoveArchive(path string) error
	ReconcileArchives(keep map[string]bool) error
}

// Store is what the manager needs of the metadata store.
type Store interface {
	CreateSandbox(ctx context.Context, sb store.Sandbox) error
	SandboxByIdempotencyKey(ctx context.Context, team, key string) (store.Sandbox, error)
	ForgetIdempotencyKey(ctx context.Context, team, key string) error
	CreateSandboxRecorded(ctx context.Context, sb store.Sandbox, edge store.LineageEdge, ev store.Event) error
	GetTemplate(ctx context.Context, name string) (store.Template, error)
	ListTemplateBuilds(ctx context.Context, templateID string) ([]store.TemplateBuild, error)
	GetSandbox(ctx context.Context, id string) (store.Sandbox, error)
	SandboxVolumeMounts(ctx context.Context, sandboxID string) ([]store.VolumeMount, error)
	ListSandboxes(ctx context.Context, f store.SandboxFilter) ([]store.Sandbox, error)
	CountSandboxes(ctx context.Context, states ...store.SandboxState) (int, error)
	UpdateSandboxState(ctx context.Context, id string, from []store.SandboxState, to store.SandboxState, reason string) error
	SetSandboxEndAt(ctx context.Context, id string, endAt time.Time) error
	DeleteSandbox(ctx context.Context, id string) error
	SetSandboxHead(ctx context.Context, id, head string) error
	SetSandboxLimits(ctx context.Context, id string, memoryBytes, cpuMillis, pids int64) error
	SetSandboxQuota(ctx context.Context, id string, bytes int64) error
	NextTurn(ctx context.Context, sandboxID string) (int, error)

	GetTeamLimits(ctx context.Context, team string) (store.TeamLimits, error)
	GetTeamUsage(ctx context.Context, team string) (store.TeamUsage, error)
	SetTeamLimits(ctx context.Context, l store.TeamLimits) error

	CreateSnapshot(ctx context.Context, snap store.Snapshot) error
	GetSnapshot(ctx context.Context, id string) (store.Snapshot, error)
	ListSnapshots(ctx context.Context, f store.SnapshotFilter) ([]store.Snapshot, error)
	UpdateSnapshotState(ctx context.Context, id string, from []store.SnapshotState, to store.SnapshotState) error
	SnapshotTaken(ctx context.Context, id, sandboxID string, edge store.LineageEdge) error
	SetSnapshotSizes(ctx context.Context, id string, exclusive, referenced int64) error
	CountForksOf(ctx context.Context, snapshotID string) (int, error)
	SetSnapshotArchive(ctx context.Context, id, parent, path string) error
	SetSnapshotMemory(ctx context.Context, id string, bytes int64) error
	CountArchivedOn(ctx context.Context, parentID string) (int, error)
	ArchiveParents(ctx context.Context, id string, limit int) ([]store.Snapshot, error)
	TurnWindow(ctx context.Context, sandboxID string, keep int) (store.TurnWindow, error)

	AddLineageEdge(ctx context.Context, e store.LineageEdge) error
	AddEvent(ctx context.Context, e store.Event) error
	ListEvents(ctx context.Context, sandboxID string, after int64, limit int) ([]store.Event, error)
	LastEvent(ctx context.Context, sandboxID string) (store.Event, error)
	AddToolCall(ctx context.Context, c store.ToolCall) (int64, error)
	ListToolCalls(ctx context.Context, sandboxID string, after int64, limit int) ([]store.ToolCall, error)
	ListLineage(ctx context.Context, family string) ([]store.LineageEdge, error)

	SetSandboxNetwork(ctx context.Context, id string, p *store.NetworkPolicy) error
	ListNetworkEvents(ctx context.Context, sandboxID string, after int64, limit int) ([]store.NetworkEvent, error)
	DeleteOrphanNetworkEvents(ctx context.Context) error
}

// Config is the part of the daemon's configuration the manager applies.
type Config struct {
	RuntimeName    string
	MaxSandboxes   int
	DefaultLimits  runtime.Limits
	MaxLimits      runtime.Limits
	DefaultTimeout time.Duration
	// RequireTimeout refuses a run timeout of 0 (never expire) wherever a
	// caller can give one (create, fork, /timeout, resume): on a shared
	// server a sandbox nobody remembers would hold its memory and disk
	// forever. The zero value allows it, as E2B does.
	RequireTimeout bool
	// MaxDiskBytes bounds a sandbox's disk quota (0 = no bound).
	MaxDiskBytes int64
	// DefaultDisk is the disk quota of a sandbox that asks for none.
	DefaultDisk int64
	// IdleTimeout pauses (or kills, per IdleAction) a running sandbox with
	// no API call and no command running for that long (0 = never).
	IdleTimeout time.Duration
	IdleAction  string
	// PausedRetention kills a sandbox paused for that long (0 = never).
	PausedRetention time.Duration
	// Pools keep ready sandboxes of some templates for fast creates.
	Pools []PoolConfig
	// MaxTurns is how many turn snapshots a sandbox keeps; older unnamed
	// turns without forks are pruned (0 = keep all).
	MaxTurns int
	// ArchiveAfter is how many of a sandbox's newest turn snapshots stay in
	// the storage pool; older ones are archived to streams and restored on
	// demand (0 = no archiving). AnchorEvery spaces the turns that stay as
	// the streams' bases (default DefaultAnchorEvery). See archive.go.
	ArchiveAfter int
	AnchorEvery  int
	// DropBatch is how many archived volumes the archiver drops at once
	// (default DefaultDropBatch; see archive.go). Fewer are dropped once
	// the sandbox has taken no turn for dropIdle.
	DropBatch int
	// OnEvent, if set, hears of every step recorded in a sandbox's history
	// (the daemon writes them into the sandbox's log).
	OnEvent func(store.Event)
	// OnTimeout, if set, hears of every timeout that fires: which one
	// (TimeoutRun, TimeoutIdle, TimeoutRetention) and the action taken
	// (IdleKill, IdlePause, IdleHibernate), for the metrics.
	OnTimeout func(timeout, action string)
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// TimeoutTick is how often the timeout loops look (0: DefaultTimeoutTick).
	TimeoutTick time.Duration
	// Volumes checks a create's volume mounts and finds the volumes (nil:
	// a create that asks for any is ErrUnsupported).
	Volumes VolumeResolver
	// Devices gives sandboxes host devices (nil: a create that asks for
	// any is ErrUnsupported). A sandbox holds them while it may run:
	// through pause, a files-only pause and restarts, until its stop or
	// delete (a failed one until its delete, which ends what is left of
	// its processes).
	Devices DeviceClaimer
}

// DeviceClaimer records which sandbox holds which host device
// (internal/devices): a create's claim, all or none, is ErrInvalid for
// names the host has not or the runtime cannot pass, ErrConflict for a
// device another sandbox holds; a delete releases them.
type DeviceClaimer interface {
	Claim(ctx context.Context, id, runtimeName string, names []string) error
	Release(ctx context.Context, id string) error
}

// VolumeResolver checks the volume mounts a create asks for (names, paths,
// none twice) and returns them with their volumes' ids; a name the team
// has no volume of is ErrInvalid.
type VolumeResolver interface {
	ResolveMounts(ctx context.Context, team string, mounts []store.VolumeMount) ([]store.VolumeMount, error)
}

// CreateRequest says what sandbox a team wants.
type CreateRequest struct {
	Team     string
	Template string
	// TemplateLabel, when Template names a built template's snapshot
	// (internal/tplbuild), is the template the sandbox reports: the built
	// template's id rather than the snapshot's root template.
	TemplateLabel string
	// Timeout is the run timeout; nil means the default, 0 means never.
	Timeout  *time.Duration
	Metadata map[string]string
	Env      map[string]string
	Limits   runtime.Limits
	// DiskBytes caps the space the sandbox may write (0 = no cap).
	DiskBytes int64
	// AutoPause pauses the sandbox at its run timeout instead of killing
	// it; AutoResume resumes it on any call that needs it.
	AutoPause, AutoResume bool
	// AutoPauseFilesOnly makes the auto-pause keep only the files (E2B's
	// autoPauseMemory: false): the sandbox boots cold on its next connect.
	AutoPauseFilesOnly bool
	// PublicPorts opens the sandbox's ports to callers without its tokens
	// or the owner's API key.
	PublicPorts bool
	// MaskRequestHost is the Host requests to its ports carry inside
	// ("${PORT}" for the port; "" = the caller's).
	MaskRequestHost string
	// ToolSnapshots takes a turn snapshot after every tool call.
	ToolSnapshots bool
	// Network is the egress policy of a sandbox that gets a network (see
	// network.go); nil: none, loopback only.
	Network *network.Policy
	// Runtime names the runtime to run it on; "" is the one its template
	// requires, else (for a fork) its parent's, else the server's default.
	// Naming another runtime than the template requires is ErrInvalid.
	Runtime string
	// FilesOnly starts a sandbox made from a snapshot taken with memory
	// from the snapshot's files alone, with fresh processes.
	FilesOnly bool
	// VolumeMounts are the shared volumes to mount (by name and path);
	// every start of the sandbox mounts them (Config.Volumes).
	VolumeMounts []store.VolumeMount
	// Devices are the host devices (CDI names) the sandbox gets, held
	// until its delete. A fork asks for its own: it gets none of its
	// parent's.
	Devices []string
	// IdempotencyKey makes CreateOnce answer a retry with the sandbox the
	// first attempt made ("" = every create makes one).
	IdempotencyKey string
	// adopted, for a sandbox moved here from another node (Adopt), is its
	// record there: the new sandbox keeps its id, lineage and start time.
	adopted *store.Sandbox
	// hibernated, with a snapshot taken with memory, creates the sandbox
	// hibernated: its processes held on disk until a resume restores them
	// (sandbox.Spec.Hibernate). Adopt asks for it.
	hibernated bool
}

// Manager is the session service: the composition of its parts, one per
// job, which share the registry (the records, the live sandboxes, their
// locks and the admission of calls). Each part holds the few host and
// store methods its job needs; Manager's exported methods are theirs,
// promoted.
type Manager struct {
	*registry
	*lifecycle
	*snapshots
	*archiver
	*warmPools
	*timeouts
	*networks
	*history
	*recovery
	*transfers

	background     sync.WaitGroup // the goroutines Start starts
	stopBackground context.CancelFunc
}

// liveSandbox is a running sandbox this daemon is attached to. The team is
// kept beside it so the hot path (every exec and file call) needs no
// database read.
type liveSandbox struct {
	*sandbox.Sandbox
	team       string
	paused     bool // paused or hibernated: no calls reach it
	hibernated bool // its processes are an image on disk
	pausedAt   time.Time
	lastActive time.Time
	draining   bool // refuses new calls while its commands finish
	// closedFor, while set, says which operation (under the sandbox's
	// lock) refuses new calls for now: see admission.go.
	closedFor  string
	takesTurns bool // it has taken a turn: its commands' writes are written back as they end
	// restarted is when its processes were last restarted by a rollback
	// (or a promote), and to which snapshot: commands cut by it say so.
	restarted   time.Time
	restartedTo string
}

// New returns a manager; call Recover before serving requests.
func New(cfg Config, st Store, host Host, log *slog.Logger) *Manager {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.AnchorEvery <= 0 {
		cfg.AnchorEvery = DefaultAnchorEvery
	}
	if cfg.DropBatch <= 0 {
		cfg.DropBatch = DefaultDropBatch
	}
	r := &registry{cfg: cfg, store: st, host: host, log: log,
		live:    map[string]*liveSandbox{},
		running: map[string]int{},
	}
	a := &archiver{registry: r, host: host, store: st,
		deletes:        make(chan string, 4096),
		archiveQ:       make(chan string, 1024),
		archivePending: map[string]bool{},
		dropRecheck:    map[string]bool{},
	}
	n := &networks{registry: r, host: host, store: st}
	w := &warmPools{registry: r, host: host, store: st,
		pools:  newPools(cfg.Pools),
		refill: make(chan struct{}, 1),
	}
	l := &lifecycle{registry: r, host: host, store: st, volumes: a, warm: w, net: n}
	l.devices = deviceHolds{claimer: cfg.Devices, records: st, log: log}
	r.autoResume = func(ctx context.Context, team, id string) error {
		_, err := l.resumeHow(ctx, team, id, CauseAutoResume, false)
		return err
	}
	snaps := &snapshots{registry: r, host: host, store: st, volumes: a, creator: l}
	// Export and import are optional: hosts that cannot (test fakes) leave
	// them unsupported.
	th, _ := host.(TransferHost)
	return &Manager{
		registry:  r,
		lifecycle: l,
		snapshots: snaps,
		archiver:  a,
		warmPools: w,
		timeouts: &timeouts{registry: r, host: host, store: st, act: l,
			actionSlots: make(chan struct{}, maxTimeoutActions)},
		networks:  n,
		history:   &history{registry: r, store: st},
		recovery:  &recovery{registry: r, host: host, store: st, volumes: a, net: n},
		transfers: &transfers{registry: r, host: th, store: st, volumes: a, snaps: snaps},
	}
}

// Close detaches from every sandbox without stopping any: they keep
// running and a later daemon reattaches.
func (m *Manager) Close() {
	// Background work must end before the store it writes to is closed.
	m.mu.Lock()
	stop := m.stopBackground
	m.mu.Unlock()
	if stop != nil {
		stop()
	}
	m.background.Wait()
	m.actions.Wait()
	// Snapshots answered before they were written record their sizes.
	m.snapshots.host.WaitSettled()
	m.stopPooled()
	m.detachAll()
}
