package session

// The parts of the session service each take the few methods of the host
// and the store their job calls; Host and Store (manager.go), which New
// takes, are their union.

import (
	"context"
	"time"

	"github.com/warrenhq/warren/internal/agentconn"
	"github.com/warrenhq/warren/internal/network"
	"github.com/warrenhq/warren/internal/runtime"
	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/storage"
	"github.com/warrenhq/warren/internal/store"
)

// registryHost is what the registry needs of the host.
type registryHost interface {
	CommandEnded(id string)
	CommandStarted(id string)
}

// registryStore is what the registry needs of the store.
type registryStore interface {
	AddEvent(ctx context.Context, e store.Event) error
	AddLineageEdge(ctx context.Context, e store.LineageEdge) error
	CountSandboxes(ctx context.Context, states ...store.SandboxState) (int, error)
	GetSandbox(ctx context.Context, id string) (store.Sandbox, error)
	GetTeamLimits(ctx context.Context, team string) (store.TeamLimits, error)
	GetTeamUsage(ctx context.Context, team string) (store.TeamUsage, error)
	ListSandboxes(ctx context.Context, f store.SandboxFilter) ([]store.Sandbox, error)
	SetTeamLimits(ctx context.Context, l store.TeamLimits) error
	UpdateSandboxState(ctx context.Context, id string, from []store.SandboxState, to store.SandboxState, reason string) error
}

// lifecycleHost is what the lifecycle needs of the host.
type lifecycleHost interface {
	Create(ctx context.Context, spec sandbox.Spec) (*sandbox.Sandbox, error)
	Destroy(ctx context.Context, id string, conn *agentconn.Conn) error
	GroupUsage(ctx context.Context, group string) (used, limit int64, err error)
	Hibernate(ctx context.Context, id string) (runtime.CheckpointInfo, error)
	MemoryImage(snapID string) (runtimeName string, ok bool)
	Pause(ctx context.Context, id string) error
	Resume(ctx context.Context, id string, conn *agentconn.Conn) error
	SetQuota(ctx context.Context, group string, bytes int64) error
	Stop(ctx context.Context, id string, grace time.Duration, conn *agentconn.Conn) (bool, error)
	UpdateLimits(ctx context.Context, id string, l runtime.Limits) error
	Wake(ctx context.Context, spec sandbox.Spec, conn *agentconn.Conn) (time.Duration, error)
	PowerOff(ctx context.Context, id string) error
	ColdBoot(ctx context.Context, spec sandbox.Spec, conn *agentconn.Conn) (time.Duration, error)
	SetEnv(ctx context.Context, sb *sandbox.Sandbox, env map[string]string) error
}

// lifecycleStore is what the lifecycle needs of the store.
type lifecycleStore interface {
	idempotencyStore
	CreateSandbox(ctx context.Context, sb store.Sandbox) error
	DeleteSandbox(ctx context.Context, id string) error
	GetSandbox(ctx context.Context, id string) (store.Sandbox, error)
	GetSnapshot(ctx context.Context, id string) (store.Snapshot, error)
	GetTemplate(ctx context.Context, name string) (store.Template, error)
	ListTemplateBuilds(ctx context.Context, templateID string) ([]store.TemplateBuild, error)
	SetSandboxEndAt(ctx context.Context, id string, endAt time.Time) error
	SetSandboxLimits(ctx context.Context, id string, memoryBytes, cpuMillis, pids int64) error
	SetSandboxQuota(ctx context.Context, id string, bytes int64) error
	UpdateSandboxState(ctx context.Context, id string, from []store.SandboxState, to store.SandboxState, reason string) error
}

// snapshotHost is what the snapshot service needs of the host.
type snapshotHost interface {
	CanSaveMemory(runtimeName string) error
	DeleteSnapshot(ctx context.Context, snapID string) error
	Destroy(ctx context.Context, id string, conn *agentconn.Conn) error
	Diff(ctx context.Context, from, to string, toLive bool) ([]storage.Change, error)
	GroupUsage(ctx context.Context, group string) (used, limit int64, err error)
	MemoryImage(snapID string) (runtimeName string, ok bool)
	ReadVolumeFile(id string, live bool, path string, limit int64) ([]byte, bool, error)
	Rollback(ctx context.Context, spec sandbox.Spec, snapID string, conn *agentconn.Conn) error
	Snapshot(ctx context.Context, id, snapID, group string, settled func(storage.Info, error)) (sandbox.SnapshotResult, error)
	SnapshotMemory(ctx context.Context, id, snapID, group string, wasPaused bool, conn *agentconn.Conn) (sandbox.SnapshotResult, int64, error)
	SnapshotStopped(ctx context.Context, id, snapID, group string) (sandbox.SnapshotResult, error)
	WaitSettled()
}

// snapshotStore is what the snapshot service needs of the store.
type snapshotStore interface {
	SandboxVolumeMounts(ctx context.Context, sandboxID string) ([]store.VolumeMount, error)
	CountForksOf(ctx context.Context, snapshotID string) (int, error)
	CreateSnapshot(ctx context.Context, snap store.Snapshot) error
	GetSandbox(ctx context.Context, id string) (store.Sandbox, error)
	GetSnapshot(ctx context.Context, id string) (store.Snapshot, error)
	ListLineage(ctx context.Context, family string) ([]store.LineageEdge, error)
	ListSandboxes(ctx context.Context, f store.SandboxFilter) ([]store.Sandbox, error)
	ListSnapshots(ctx context.Context, f store.SnapshotFilter) ([]store.Snapshot, error)
	NextTurn(ctx context.Context, sandboxID string) (int, error)
	SetSandboxHead(ctx context.Context, id, head string) error
	SetSnapshotMemory(ctx context.Context, id string, bytes int64) error
	SetSnapshotSizes(ctx context.Context, id string, exclusive, referenced int64) error
	SnapshotTaken(ctx context.Context, id, sandboxID string, edge store.LineageEdge) error
	UpdateSnapshotState(ctx context.Context, id string, from []store.SnapshotState, to store.SnapshotState) error
}

// archiveHost is what the archiver needs of the host.
type archiveHost interface {
	ArchiveSnapshot(ctx context.Context, snapID, parentID string) (string, error)
	CanArchive() bool
	DeleteSnapshot(ctx context.Context, snapID string) error
	HasArchive(path string) bool
	HasSnapshot(ctx context.Context, snapID string) bool
	RemoveArchive(path string) error
	RestoreSnapshot(ctx context.Context, snapID, baseID string, paths []string) error
}

// archiveStore is what the archiver needs of the store.
type archiveStore interface {
	ArchiveParents(ctx context.Context, id string, limit int) ([]store.Snapshot, error)
	CountArchivedOn(ctx context.Context, parentID string) (int, error)
	CountForksOf(ctx context.Context, snapshotID string) (int, error)
	GetSnapshot(ctx context.Context, id string) (store.Snapshot, error)
	ListSnapshots(ctx context.Context, f store.SnapshotFilter) ([]store.Snapshot, error)
	SetSnapshotArchive(ctx context.Context, id, parent, path string) error
	TurnWindow(ctx context.Context, sandboxID string, keep int) (store.TurnWindow, error)
	UpdateSnapshotState(ctx context.Context, id string, from []store.SnapshotState, to store.SnapshotState) error
}

// poolHost is what the warm pools needs of the host.
type poolHost interface {
	Create(ctx context.Context, spec sandbox.Spec) (*sandbox.Sandbox, error)
	Destroy(ctx context.Context, id string, conn *agentconn.Conn) error
	PrimeFirstCommand(ctx context.Context, sb *sandbox.Sandbox) error
	SetEnv(ctx context.Context, sb *sandbox.Sandbox, env map[string]string) error
	SetQuota(ctx context.Context, group string, bytes int64) error
	UpdateLimits(ctx context.Context, id string, l runtime.Limits) error
	UpdateNetwork(ctx context.Context, id string, p network.Policy) error
}

// poolStore is what the warm pools needs of the store.
type poolStore interface {
	CountSandboxes(ctx context.Context, states ...store.SandboxState) (int, error)
	CreateSandboxRecorded(ctx context.Context, sb store.Sandbox, edge store.LineageEdge, ev store.Event) error
	GetTemplate(ctx context.Context, name string) (store.Template, error)
}

// timeoutHost is what the timeouts needs of the host.
type timeoutHost interface {
	Alive(ctx context.Context, id string) (bool, error)
	Destroy(ctx context.Context, id string, conn *agentconn.Conn) error
}

// timeoutStore is what the timeouts needs of the store.
type timeoutStore interface {
	GetSandbox(ctx context.Context, id string) (store.Sandbox, error)
	ListSandboxes(ctx context.Context, f store.SandboxFilter) ([]store.Sandbox, error)
	UpdateSandboxState(ctx context.Context, id string, from []store.SandboxState, to store.SandboxState, reason string) error
}

// networkHost is what the network policies needs of the host.
type networkHost interface {
	AdoptNetwork(ctx context.Context, id string, p network.Policy) error
	NetworkAvailable() error
	UpdateNetwork(ctx context.Context, id string, p network.Policy) error
}

// networkStore is what the network policies needs of the store.
type networkStore interface {
	GetSandbox(ctx context.Context, id string) (store.Sandbox, error)
	ListNetworkEvents(ctx context.Context, sandboxID string, after int64, limit int) ([]store.NetworkEvent, error)
	SetSandboxNetwork(ctx context.Context, id string, p *store.NetworkPolicy) error
}

// historyStore is what the history needs of the store.
type historyStore interface {
	AddToolCall(ctx context.Context, c store.ToolCall) (int64, error)
	GetSandbox(ctx context.Context, id string) (store.Sandbox, error)
	LastEvent(ctx context.Context, sandboxID string) (store.Event, error)
	ListEvents(ctx context.Context, sandboxID string, after int64, limit int) ([]store.Event, error)
	ListToolCalls(ctx context.Context, sandboxID string, after int64, limit int) ([]store.ToolCall, error)
}

// recoveryHost is what the recovery needs of the host.
type recoveryHost interface {
	Attach(ctx context.Context, id string) (*sandbox.Sandbox, error)
	HasArchive(path string) bool
	IsHibernated(id string) bool
	Pause(ctx context.Context, id string) error
	Reconcile(ctx context.Context, keep map[string]bool) error
	ReconcileArchives(keep map[string]bool) error
	ReconcileSnapshots(ctx context.Context, keep map[string]bool) error
	Recover(ctx context.Context, id string) (*sandbox.Sandbox, error)
	Resume(ctx context.Context, id string, conn *agentconn.Conn) error
	SnapshotInfo(ctx context.Context, snapID string) (storage.Info, error)
}

// recoveryStore is what the recovery needs of the store.
type recoveryStore interface {
	CountArchivedOn(ctx context.Context, parentID string) (int, error)
	DeleteOrphanNetworkEvents(ctx context.Context) error
	DeleteSandbox(ctx context.Context, id string) error
	ListSandboxes(ctx context.Context, f store.SandboxFilter) ([]store.Sandbox, error)
	ListSnapshots(ctx context.Context, f store.SnapshotFilter) ([]store.Snapshot, error)
	SetSnapshotArchive(ctx context.Context, id, parent, path string) error
	SetSnapshotSizes(ctx context.Context, id string, exclusive, referenced int64) error
	UpdateSnapshotState(ctx context.Context, id string, from []store.SnapshotState, to store.SnapshotState) error
}
