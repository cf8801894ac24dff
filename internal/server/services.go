package server

import (
	"context"
	"time"

	"github.com/warrenhq/warren/internal/agentconn"
	"github.com/warrenhq/warren/internal/network"
	"github.com/warrenhq/warren/internal/runtime"
	"github.com/warrenhq/warren/internal/session"
	"github.com/warrenhq/warren/internal/store"
)

// What each route group needs of the session service: a role each, so
// that a handler depends on the few methods it calls and can be tested
// against a fake of them. *session.Manager is all of them.

// Records is what the sandbox routes need (sandboxRoutes, and logRoutes,
// metricsRoutes and toolRoutes to look a sandbox up): create, look up,
// list and delete.
type Records interface {
	CreateOnce(ctx context.Context, req session.CreateRequest) (store.Sandbox, bool, error)
	CheckTimeout(d time.Duration) error
	Get(ctx context.Context, team, id string) (store.Sandbox, error)
	List(ctx context.Context, team string, f store.SandboxFilter) ([]store.Sandbox, error)
	Delete(ctx context.Context, team, id string) error
	Events(ctx context.Context, team, id string, after int64, limit int) ([]store.Event, error)
	ToolCalls(ctx context.Context, team, id string, after int64, limit int) ([]store.ToolCall, error)
	DiskUsage(ctx context.Context, id string) (used, limit int64, err error)
}

// Lifecycle is what the lifecycle routes need (lifecycleRoutes).
type Lifecycle interface {
	Get(ctx context.Context, team, id string) (store.Sandbox, error)
	Pause(ctx context.Context, team, id string) error
	Resume(ctx context.Context, team, id string) (bool, error)
	Reboot(ctx context.Context, team, id string) (bool, error)
	PauseFiles(ctx context.Context, team, id string) error
	Hibernate(ctx context.Context, team, id string) (store.Sandbox, error)
	Stop(ctx context.Context, team, id string, grace time.Duration) (store.Sandbox, bool, error)
	Drain(ctx context.Context, team, id string, wait, grace time.Duration) (store.Sandbox, bool, error)
	CheckTimeout(d time.Duration) error
	SetTimeout(ctx context.Context, team, id string, d time.Duration) error
	ExtendTimeout(ctx context.Context, team, id string, d time.Duration) error
	UpdateLimits(ctx context.Context, team, id string, l runtime.Limits, diskBytes int64) (store.Sandbox, error)
	DiskUsage(ctx context.Context, id string) (used, limit int64, err error)
}

// Snapshots is what the snapshot and lineage routes need (snapshotRoutes).
type Snapshots interface {
	Snapshot(ctx context.Context, team, id string, req session.SnapshotRequest) (session.SnapshotResult, error)
	Turn(ctx context.Context, team, id string) (session.SnapshotResult, error)
	ListSnapshots(ctx context.Context, team string, f store.SnapshotFilter) ([]store.Snapshot, error)
	GetSnapshot(ctx context.Context, team, snapID string) (store.Snapshot, error)
	DeleteSnapshot(ctx context.Context, team, snapID string) error
	Rollback(ctx context.Context, team, id, snapID string, opts session.RollbackOptions) (store.Sandbox, error)
	Fork(ctx context.Context, team, id string, req session.ForkRequest) (string, []session.ForkResult, error)
	CheckTimeout(d time.Duration) error
	Promote(ctx context.Context, team, forkID string) (store.Sandbox, string, string, error)
	Diff(ctx context.Context, team, from, to string) (session.DiffResult, error)
	ReadForDiff(side string, path string, limit int64) ([]byte, bool, error)
	Lineage(ctx context.Context, team, id string) (session.Lineage, error)
	ExportSnapshot(ctx context.Context, team, id, base string, withMemory bool, start func(session.ExportInfo) (session.ExportSink, error)) error
	ImportSnapshot(ctx context.Context, team string, req session.ImportRequest) (store.Snapshot, bool, error)
	Merge(ctx context.Context, team, id string, req session.MergeRequest) (session.MergeResult, error)
	ForksSummary(ctx context.Context, team, id string, threshold float64) ([]session.ForkVerdict, error)
}

// Networks is what the network routes need (networkRoutes).
type Networks interface {
	Get(ctx context.Context, team, id string) (store.Sandbox, error)
	UpdateNetwork(ctx context.Context, team, id string, p network.Policy) (store.Sandbox, error)
	NetworkEvents(ctx context.Context, team, id string, after int64, limit int) ([]store.NetworkEvent, error)
}

// Plane is what the routes that proxy to a sandbox need (envdRoutes,
// portRoutes, processRoutes): its agent without counting a call, since
// their streams may outlive any command.
type Plane interface {
	Lookup(ctx context.Context, id string) (store.Sandbox, error)
	Agent(ctx context.Context, team, id string) (*agentconn.Conn, error)
	ActivityMeter(id string) *session.ActivityMeter
	Attached() []string
}

// Daemon is what health and pool stats need (healthRoutes).
type Daemon interface {
	NetworkAvailable() error
	CommandsInFlight() int
	PoolStats() []session.PoolStats
}

// Sessions is every role at once: the session service.
type Sessions interface {
	Records
	Lifecycle
	Snapshots
	Networks
	Plane
	Daemon
	Teams
}

var _ Sessions = (*session.Manager)(nil)
