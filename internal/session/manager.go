// Package session decides what happens to sandboxes: it owns their records,
// their lifecycle state machine, limits, teams and timeouts. It makes no
// syscalls; the sandbox.Host it is given does the work.
package session

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/warrenhq/warren/internal/agentconn"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
	"github.com/warrenhq/warren/internal/keylock"
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
	CreateSandboxRecorded(ctx context.Context, sb store.Sandbox, edge store.LineageEdge, ev store.Event) error
	GetTemplate(ctx context.Context, name string) (store.Template, error)
	GetSandbox(ctx context.Context, id string) (store.Sandbox, error)
	ListSandboxes(ctx context.Context, f store.SandboxFilter) ([]store.Sandbox, error)
	CountSandboxes(ctx context.Context, states ...store.SandboxState) (int, error)
	UpdateSandboxState(ctx context.Context, id string, from []store.SandboxState, to store.SandboxState, reason string) error
	SetSandboxEndAt(ctx context.Context, id string, endAt time.Time) error
	DeleteSandbox(ctx context.Context, id string) error
	SetSandboxHead(ctx context.Context, id, head string) error
	SetSandboxLimits(ctx context.Context, id string, memoryBytes, cpuMillis, pids int64) error
	SetSandboxQuota(ctx context.Context, id string, bytes int64) error
	NextTurn(ctx context.Context, sandboxID string) (int, error)

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
}

// CreateRequest says what sandbox a team wants.
type CreateRequest struct {
	Team     string
	Template string
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
	// PublicPorts opens the sandbox's ports to callers without its tokens
	// or the owner's API key.
	PublicPorts bool
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
}

// Manager is the session service.
type Manager struct {
	cfg   Config
	store Store
	host  Host
	log   *slog.Logger

	createMu sync.Mutex // makes count-then-insert atomic for the sandbox limit

	mu      sync.Mutex
	live    map[string]*liveSandbox
	sbLocks keylock.Locks  // serialises snapshot, rollback and delete per sandbox
	running map[string]int // commands in flight per sandbox
	deletes chan string    // snapshot volumes to delete in the background

	pools  map[string]*pool
	refill chan struct{}

	background     sync.WaitGroup // the goroutines Start starts
	stopBackground context.CancelFunc
	// actions are the timeout actions under way (see timeouts.go), each
	// holding one of actionSlots.
	actions     sync.WaitGroup
	actionSlots chan struct{}

	snapLocks      keylock.Locks   // a snapshot's volume in use (shared) or moving (exclusive)
	archiveQ       chan string     // sandboxes whose turns the archiver should look at
	archivePending map[string]bool // sandboxes queued in archiveQ
	dropRecheck    map[string]bool // sandboxes the archiver looks at again after dropIdle
	// archiveMu orders changes to archive chains (streams recorded, volumes
	// dropped, links kept or removed); taken after any snapshot lock.
	archiveMu sync.Mutex
	// chainWalked, when set (by tests), runs after a restore has walked an
	// archive chain and before it locks the base it found.
	chainWalked func(base string)
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
	return &Manager{cfg: cfg, store: st, host: host, log: log,
		live:           map[string]*liveSandbox{},
		running:        map[string]int{},
		deletes:        make(chan string, 4096),
		archiveQ:       make(chan string, 1024),
		archivePending: map[string]bool{},
		dropRecheck:    map[string]bool{},
		pools:          newPools(cfg.Pools),
		refill:         make(chan struct{}, 1),
		actionSlots:    make(chan struct{}, maxTimeoutActions),
	}
}

// Create makes and starts a sandbox and returns its record. The template
// may also name a ready snapshot of the team's: the new sandbox is then a
// fork of it.
func (m *Manager) Create(ctx context.Context, req CreateRequest) (store.Sandbox, error) {
	if err := m.validate(&req); err != nil {
		return store.Sandbox{}, err
	}
	limits := m.limitsFor(req.Limits)
	if req.DiskBytes == 0 {
		req.DiskBytes = m.cfg.DefaultDisk
	}
	now := m.cfg.Now().UTC()
	rec := m.newRecord(req, limits, now)
	spec := sandbox.Spec{ID: rec.ID, Template: rec.Template, Limits: limits, Env: rec.Env, Group: rec.ID, QuotaBytes: rec.QuotaBytes, Network: req.Network}
	if snap, err := m.snapshotAsSource(ctx, req.Team, req.Template); err != nil {
		return store.Sandbox{}, err
	} else if snap != nil {
		if err := m.forkFrom(ctx, req, *snap, &rec, &spec); err != nil {
			return store.Sandbox{}, err
		}
	}
	tmpl, err := m.templateOf(ctx, rec.Template)
	if err != nil {
		return store.Sandbox{}, err
	}
	if need := tmpl.Runtime; need != "" {
		if req.Runtime != "" && req.Runtime != need {
			return store.Sandbox{}, fmt.Errorf("template %s requires the %s runtime; drop runtime %q or ask for %q: %w", rec.Template, need, req.Runtime, need, errdefs.ErrInvalid)
		}
		// A restore from memory stays on the runtime that saved it (the
		// only one that can read the image), even if the template was
		// rebuilt with another requirement since.
		if spec.MemoryFrom == "" {
			rec.Runtime = need
		}
	}
	spec.Runtime = rec.Runtime
	timeout := m.cfg.DefaultTimeout
	if req.Timeout != nil {
		timeout = *req.Timeout
	}
	if timeout > 0 {
		rec.EndAt = now.Add(timeout)
	}

	if spec.Snapshot == "" {
		if e, ok := m.claim(ctx, req, rec.Runtime, tmpl); ok {
			return m.claimed(ctx, e, rec, now)
		}
	}
	if spec.Snapshot != "" {
		// The snapshot's volume must be in the pool (restored if archived)
		// for as long as the copy takes.
		release, err := m.useSnapshots(ctx, store.Snapshot{ID: spec.Snapshot})
		if err != nil {
			return store.Sandbox{}, err
		}
		defer release()
	}
	if err := m.reserve(ctx, rec); err != nil {
		return store.Sandbox{}, err
	}
	sb, err := m.host.Create(ctx, spec)
	if err != nil {
		bg := context.WithoutCancel(ctx)
		if errdefs.IsNotFound(err) || errdefs.IsInvalid(err) || errdefs.IsUnsupported(err) {
			// The request was wrong: leave no trace of it.
			if derr := m.store.DeleteSandbox(bg, rec.ID); derr != nil {
				m.log.Warn("drop record of a rejected sandbox", "sandbox", rec.ID, "err", derr)
			}
			return store.Sandbox{}, err
		}
		m.fail(bg, rec.ID, err.Error())
		return store.Sandbox{}, fmt.Errorf("create sandbox: %w", err)
	}
	if err := m.started(ctx, rec, spec, sb); err != nil {
		return store.Sandbox{}, err
	}
	rec.State = StateRunning
	return rec, nil
}

// newRecord is the record of a sandbox a create asks for, before its
// source (template or snapshot) and runtime are settled.
func (m *Manager) newRecord(req CreateRequest, limits runtime.Limits, now time.Time) store.Sandbox {
	rec := store.Sandbox{
		ID:            ids.New(20),
		Team:          req.Team,
		Template:      req.Template,
		Runtime:       m.cfg.RuntimeName,
		State:         StateCreating,
		Metadata:      req.Metadata,
		Env:           req.Env,
		MemoryBytes:   limits.MemoryBytes,
		CPUMillis:     limits.CPUMillis,
		Pids:          limits.Pids,
		QuotaBytes:    req.DiskBytes,
		AutoPause:     req.AutoPause,
		AutoResume:    req.AutoResume,
		PublicPorts:   req.PublicPorts,
		ToolSnapshots: req.ToolSnapshots,
		Network:       storedPolicy(req.Network),
		CreatedAt:     now,
		UpdatedAt:     now,
		StartedAt:     now,
	}
	rec.Family = rec.ID
	if req.Runtime != "" {
		rec.Runtime = req.Runtime
	}
	rec.Family = rec.ID
	if req.Runtime != "" {
		rec.Runtime = req.Runtime
	}
	return rec
}

// forkFrom makes a create start from one of the team's snapshots: the
// record joins the snapshot's family and keeps its parent's runtime, and a
// snapshot with memory restores its processes (on the runtime that saved
// them) unless the request asks for its files only.
func (m *Manager) forkFrom(ctx context.Context, req CreateRequest, snap store.Snapshot, rec *store.Sandbox, spec *sandbox.Spec) error {
	rec.Template = snap.Template
	rec.Family = snap.Family
	rec.ForkedFrom = snap.ID
	rec.ParentSandbox = snap.SandboxID
	rec.Head = snap.ID
	spec.Template, spec.Snapshot = snap.Template, snap.ID
	if parent, err := m.store.GetSandbox(ctx, snap.SandboxID); err == nil && req.Runtime == "" && parent.Runtime != "" {
		rec.Runtime = parent.Runtime // a fork keeps its parent's runtime
	}
	if snap.MemoryBytes > 0 && !req.FilesOnly {
		rt, ok := m.host.MemoryImage(snap.ID)
		if !ok {
			return fmt.Errorf("snapshot %s's memory image is missing; start from its files only (filesOnly): %w", snap.ID, errdefs.ErrNotFound)
		}
		if rt != "" {
			// Only the runtime that saved the memory can restore it.
			if req.Runtime != "" && req.Runtime != rt {
				return fmt.Errorf("snapshot %s holds memory saved by the %s runtime, which alone can restore it; drop runtime %q or ask for filesOnly: %w", snap.ID, rt, req.Runtime, errdefs.ErrInvalid)
			}
			rec.Runtime = rt
		}
		spec.MemoryFrom = snap.ID
	}
	return nil
}

// started records a created sandbox as running and live, with its event
// and lineage edge; if the record cannot be updated the sandbox goes.
func (m *Manager) started(ctx context.Context, rec store.Sandbox, spec sandbox.Spec, sb *sandbox.Sandbox) error {
	if err := m.store.UpdateSandboxState(ctx, rec.ID, []store.SandboxState{StateCreating}, StateRunning, ""); err != nil {
		_ = m.host.Destroy(context.WithoutCancel(ctx), rec.ID, sb.Agent)
		m.fail(context.WithoutCancel(ctx), rec.ID, "record update failed: "+err.Error())
		return err
	}
	m.mu.Lock()
	m.live[rec.ID] = &liveSandbox{Sandbox: sb, team: rec.Team, lastActive: m.cfg.Now()}
	m.mu.Unlock()
	created := "from template " + rec.Template
	if rec.ForkedFrom != "" {
		created = "forked from snapshot " + rec.ForkedFrom
		if spec.MemoryFrom != "" {
			created += " with its memory: processes restored"
		}
	}
	m.event(ctx, rec, "created", "", StateRunning, CauseAPI, created)
	if rec.ForkedFrom != "" {
		m.edge(context.WithoutCancel(ctx), rec.Family, EdgeForkedFrom, rec.ID, rec.ForkedFrom)
	} else {
		m.edge(context.WithoutCancel(ctx), rec.Family, EdgeCreatedFrom, rec.ID, rec.Template)
	}
	return nil
}

// templateOf returns the record of the template a sandbox is made from; a
// template without one (not built, or removed since a snapshot was taken
// from it) gives a zero record: the storage answers for the volume itself.
func (m *Manager) templateOf(ctx context.Context, name string) (store.Template, error) {
	t, err := m.store.GetTemplate(ctx, name)
	if errdefs.IsNotFound(err) {
		return store.Template{}, nil
	}
	return t, err
}

// snapshotAsSource resolves a create's templateID that names one of the
// team's snapshots (E2B: a snapshot id is usable as a template). It returns
// nil when the name is not a snapshot id of the team.
func (m *Manager) snapshotAsSource(ctx context.Context, team, name string) (*store.Snapshot, error) {
	if ids.Validate("snapshot id", name) != nil {
		return nil, nil
	}
	snap, err := m.store.GetSnapshot(ctx, name)
	if errdefs.IsNotFound(err) || (err == nil && snap.Team != team) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if snap.State != SnapReady && snap.State != SnapArchived {
		return nil, fmt.Errorf("snapshot %s was deleted: %w", name, errdefs.ErrNotFound)
	}
	return &snap, nil
}

// reserve inserts the record in "creating" unless the sandbox limit is hit.
func (m *Manager) reserve(ctx context.Context, rec store.Sandbox) error {
	return m.reserveWith(ctx, rec, func() error { return m.store.CreateSandbox(ctx, rec) })
}

// reserveWith runs create (which writes rec's record) if the server's
// sandbox limit has room.
func (m *Manager) reserveWith(ctx context.Context, rec store.Sandbox, create func() error) error {
	m.createMu.Lock()
	defer m.createMu.Unlock()
	n, err := m.store.CountSandboxes(ctx, liveStates...)
	if err != nil {
		return err
	}
	if n >= m.cfg.MaxSandboxes {
		return fmt.Errorf("%d sandboxes are running, the most this server allows (--max-sandboxes); delete one first: %w", n, errdefs.ErrResourceExhausted)
	}
	return create()
}

func (m *Manager) fail(ctx context.Context, id, reason string) {
	rec, _ := m.store.GetSandbox(ctx, id)
	if err := m.store.UpdateSandboxState(ctx, id, sourcesOf(StateFailed), StateFailed, reason); err != nil {
		m.log.Warn("mark sandbox failed", "sandbox", id, "err", err)
		return
	}
	if rec.ID != "" {
		m.event(ctx, rec, "failed", rec.State, StateFailed, CauseError, reason)
	}
}

// Delete destroys a team's sandbox and forgets it.
func (m *Manager) Delete(ctx context.Context, team, id string) error {
	unlock := m.lockSandbox(id)
	defer unlock()
	rec, err := m.Get(ctx, team, id)
	if err != nil {
		return err
	}
	return m.destroy(ctx, rec, CauseAPI)
}

func (m *Manager) destroy(ctx context.Context, rec store.Sandbox, cause string) error {
	ctx = context.WithoutCancel(ctx)
	if err := checkTransition(rec.ID, rec.State, StateDestroyed); err != nil {
		return err
	}
	if err := m.store.UpdateSandboxState(ctx, rec.ID, sourcesOf(StateDestroyed), StateDestroyed, ""); err != nil {
		return err
	}
	m.event(ctx, rec, "destroyed", rec.State, StateDestroyed, cause, "")
	m.mu.Lock()
	sb := m.live[rec.ID]
	delete(m.live, rec.ID)
	m.mu.Unlock()
	var conn *agentconn.Conn
	if sb != nil {
		conn = sb.Agent
	}
	if err := m.host.Destroy(ctx, rec.ID, conn); err != nil {
		// The record stays (as destroyed) so that the next start's
		// reconcile, which sees no live record, removes what is left.
		m.log.Error("destroy sandbox", "sandbox", rec.ID, "err", err)
		return fmt.Errorf("destroy sandbox %s: %w", rec.ID, err)
	}
	return m.store.DeleteSandbox(ctx, rec.ID)
}

func (m *Manager) validate(req *CreateRequest) error {
	if err := ids.ValidateName("team", req.Team); err != nil {
		return err
	}
	if req.Template == "" {
		req.Template = "base"
	}
	if err := ids.ValidateName("templateID", req.Template); err != nil {
		return err
	}
	if req.Timeout != nil {
		if err := m.CheckTimeout(*req.Timeout); err != nil {
			return err
		}
	}
	if err := validateMap("metadata", req.Metadata); err != nil {
		return err
	}
	if err := validateEnv(req.Env); err != nil {
		return err
	}
	if req.DiskBytes < 0 || (req.DiskBytes > 0 && req.DiskBytes < 16<<20) {
		return fmt.Errorf("disk quota must be 0 (none) or at least 16 MiB: %w", errdefs.ErrInvalid)
	}
	if m.cfg.MaxDiskBytes > 0 && req.DiskBytes > m.cfg.MaxDiskBytes {
		return fmt.Errorf("disk quota %d MiB is above this server's maximum of %d MiB: %w", req.DiskBytes>>20, m.cfg.MaxDiskBytes>>20, errdefs.ErrInvalid)
	}
	l, max := req.Limits, m.cfg.MaxLimits
	switch {
	case l.MemoryBytes < 0 || l.CPUMillis < 0 || l.Pids < 0:
		return fmt.Errorf("limits must not be negative: %w", errdefs.ErrInvalid)
	case l.MemoryBytes != 0 && l.MemoryBytes < 16<<20:
		return fmt.Errorf("memory limit %d MiB is below the minimum of 16 MiB: %w", l.MemoryBytes>>20, errdefs.ErrInvalid)
	case max.MemoryBytes > 0 && l.MemoryBytes > max.MemoryBytes:
		return fmt.Errorf("memory limit %d MiB is above this server's maximum of %d MiB: %w", l.MemoryBytes>>20, max.MemoryBytes>>20, errdefs.ErrInvalid)
	case l.CPUMillis != 0 && l.CPUMillis < 10:
		return fmt.Errorf("cpu limit below 0.01 CPU: %w", errdefs.ErrInvalid)
	case max.CPUMillis > 0 && l.CPUMillis > max.CPUMillis:
		return fmt.Errorf("cpu limit %.2f is above this server's maximum of %.2f CPUs: %w", float64(l.CPUMillis)/1000, float64(max.CPUMillis)/1000, errdefs.ErrInvalid)
	case l.Pids != 0 && l.Pids < 16:
		return fmt.Errorf("pids limit %d is below the minimum of 16: %w", l.Pids, errdefs.ErrInvalid)
	case max.Pids > 0 && l.Pids > max.Pids:
		return fmt.Errorf("pids limit %d is above this server's maximum of %d: %w", l.Pids, max.Pids, errdefs.ErrInvalid)
	}
	return m.checkNetwork(req.Network)
}

// limitsOf reads a sandbox's limits from its record.
func limitsOf(rec store.Sandbox) runtime.Limits {
	return runtime.Limits{MemoryBytes: rec.MemoryBytes, CPUMillis: rec.CPUMillis, Pids: rec.Pids}
}

func (m *Manager) limitsFor(l runtime.Limits) runtime.Limits {
	d := m.cfg.DefaultLimits
	if l.MemoryBytes == 0 {
		l.MemoryBytes = d.MemoryBytes
	}
	if l.CPUMillis == 0 {
		l.CPUMillis = d.CPUMillis
	}
	if l.Pids == 0 {
		l.Pids = d.Pids
	}
	return l.WithDefaults()
}

const (
	maxMapEntries = 64
	maxKeyLen     = 256
	maxValueLen   = 4096
)

func validateMap(what string, kv map[string]string) error {
	if len(kv) > maxMapEntries {
		return fmt.Errorf("%s has %d entries, at most %d allowed: %w", what, len(kv), maxMapEntries, errdefs.ErrInvalid)
	}
	for k, v := range kv {
		if k == "" || len(k) > maxKeyLen {
			return fmt.Errorf("%s key %.32q must be 1..%d bytes: %w", what, k, maxKeyLen, errdefs.ErrInvalid)
		}
		if len(v) > maxValueLen {
			return fmt.Errorf("%s value of %q is longer than %d bytes: %w", what, k, maxValueLen, errdefs.ErrInvalid)
		}
	}
	return nil
}

func validateEnv(env map[string]string) error {
	if err := validateMap("envVars", env); err != nil {
		return err
	}
	for k, v := range env {
		for i := 0; i < len(k); i++ {
			c := k[i]
			ok := c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (i > 0 && c >= '0' && c <= '9')
			if !ok {
				return fmt.Errorf("envVars name %q must match [A-Za-z_][A-Za-z0-9_]*: %w", k, errdefs.ErrInvalid)
			}
		}
		for i := 0; i < len(v); i++ {
			if v[i] == 0 {
				return fmt.Errorf("envVars value of %q holds a NUL byte: %w", k, errdefs.ErrInvalid)
			}
		}
	}
	return nil
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
	m.host.WaitSettled()
	// Pooled sandboxes belong to nobody: stop them rather than leave them
	// for the next daemon to find and remove.
	for _, p := range m.pools {
		p.mu.Lock()
		ready := p.ready
		p.ready = nil
		ready = append(ready, p.stale...)
		p.stale = nil
		p.mu.Unlock()
		for _, e := range ready {
			sb := e.sb
			if err := m.host.Destroy(context.Background(), sb.ID, sb.Agent); err != nil {
				m.log.Warn("stop a pooled sandbox", "sandbox", sb.ID, "err", err)
			}
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, sb := range m.live {
		if sb.Agent != nil {
			sb.Agent.Close()
		}
		delete(m.live, id)
	}
}
