package client

import "time"

// NewSnapshot is the body of POST /sandboxes/{id}/snapshots (E2B's shape
// plus warren's labels).
type NewSnapshot struct {
	Name   string            `json:"name,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
	// Memory saves the sandbox's memory and processes with its files
	// (gvisor sandboxes only; others answer 400): forks and rollbacks to
	// the snapshot carry on with the processes as they were.
	Memory bool `json:"memory,omitempty"`
}

// Snapshot describes one snapshot. SnapshotID and Names are E2B's fields;
// the rest are warren's.
type Snapshot struct {
	SnapshotID string   `json:"snapshotID"`
	Names      []string `json:"names"`

	SandboxID string `json:"sandboxID"`
	Family    string `json:"family"`
	Name      string `json:"name,omitempty"`
	// Kind is "named", "turn" or "implicit" (taken by a fork or a promote).
	Kind     string            `json:"kind"`
	Turn     int               `json:"turn,omitempty"`
	ParentID string            `json:"parentID,omitempty"`
	Template string            `json:"templateID"`
	State    string            `json:"state"` // "ready" or "deleted" (a tombstone in the lineage)
	Labels   map[string]string `json:"labels,omitempty"`
	// ExclusiveBytes is the space only this snapshot holds; ReferencedBytes
	// all it refers to. -1 when unknown.
	ExclusiveBytes  int64      `json:"exclusiveBytes"`
	ReferencedBytes int64      `json:"referencedBytes"`
	CreatedAt       time.Time  `json:"createdAt"`
	DeletedAt       *time.Time `json:"deletedAt,omitempty"`
	// FrozenMs is how long the sandbox was frozen to take it (on create).
	FrozenMs float64 `json:"frozenMs,omitempty"`
	// MemoryBytes is the size of the memory image saved with the files
	// (snapshots taken with memory); 0 = files only.
	MemoryBytes int64 `json:"memoryBytes,omitempty"`
	// MemoryDropped, on an import's answer, says why the memory image the
	// bundle carried was not kept (this node cannot restore it): the
	// snapshot has its files only.
	MemoryDropped string `json:"memoryDropped,omitempty"`
}

// RollbackRequest is the body of POST /sandboxes/{id}/rollback.
type RollbackRequest struct {
	SnapshotID string `json:"snapshotID"`
	// Force rolls back even while commands are running (they are killed).
	Force bool `json:"force,omitempty"`
	// FilesOnly takes only the files of a snapshot taken with memory: the
	// processes restart instead of being restored.
	FilesOnly bool `json:"filesOnly,omitempty"`
}

// RollbackResult answers a rollback (and a promote).
type RollbackResult struct {
	Sandbox SandboxDetail `json:"sandbox"`
	// SnapshotID is the snapshot the live tree now comes from.
	SnapshotID string `json:"snapshotID"`
	// ProcessesRestarted: a rollback replaces the filesystem and restarts
	// every process, unless the snapshot was taken with memory: then the
	// processes are restored as they were (ProcessesRestored).
	ProcessesRestarted bool `json:"processesRestarted"`
	ProcessesRestored  bool `json:"processesRestored,omitempty"`
	// PreviousSnapshotID is the snapshot of the state replaced (promote
	// only: the parent keeps its history).
	PreviousSnapshotID string `json:"previousSnapshotID,omitempty"`
}

// ForkRequest is the body of POST /sandboxes/{id}/fork.
type ForkRequest struct {
	// SnapshotID to fork from; empty forks the live state (an implicit
	// snapshot is taken).
	SnapshotID string            `json:"snapshotID,omitempty"`
	Count      int               `json:"count,omitempty"` // default 1
	Metadata   map[string]string `json:"metadata,omitempty"`
	Timeout    *int64            `json:"timeout,omitempty"` // seconds, like create
	// Memory forks the live state with its memory (gvisor): every fork
	// carries on with the parent's processes as they were. A SnapshotID
	// taken with memory forks with memory anyway, unless FilesOnly.
	Memory    bool `json:"memory,omitempty"`
	FilesOnly bool `json:"filesOnly,omitempty"`
	// Devices each fork asks for (CDI names): a fork gets none of its
	// parent's, and an exclusive device goes to one fork at most.
	Devices []string `json:"devices,omitempty"`
}

// ForkResult is one element of the fork answer: a sandbox or an error
// (E2B's shape).
type ForkResult struct {
	Sandbox *Sandbox `json:"sandbox,omitempty"`
	Error   *Error   `json:"error,omitempty"`
}

// DiffEntry is one changed path.
type DiffEntry struct {
	Path    string `json:"path"`
	Change  string `json:"change"` // "added", "modified", "removed"
	Type    string `json:"type"`   // "file", "dir", "symlink", "other"
	Size    int64  `json:"size"`
	OldSize int64  `json:"oldSize"`
	Mode    uint32 `json:"mode,omitempty"`
	OldMode uint32 `json:"oldMode,omitempty"`
	// Diff is a unified diff, for small text files when ?content=true.
	Diff string `json:"diff,omitempty"`
}

// Diff answers GET /snapshots/{a}/diff?to=b|live.
type Diff struct {
	From     string      `json:"from"`
	To       string      `json:"to"`
	Added    int         `json:"added"`
	Modified int         `json:"modified"`
	Removed  int         `json:"removed"`
	Changes  []DiffEntry `json:"changes"`
	TookMs   float64     `json:"tookMs"`
}

// LineageNode is a sandbox or a snapshot of a family.
type LineageNode struct {
	ID   string `json:"id"`
	Type string `json:"type"` // "template", "sandbox" or "snapshot"
	// State of the sandbox (running, …, "destroyed") or snapshot (ready, deleted).
	State     string    `json:"state"`
	Name      string    `json:"name,omitempty"`
	Kind      string    `json:"kind,omitempty"` // snapshot kind
	Turn      int       `json:"turn,omitempty"`
	CreatedAt time.Time `json:"createdAt,omitempty"`
	// Head marks a sandbox's current base snapshot.
	Head string `json:"head,omitempty"`
}

// LineageEdge links two nodes: "snapshot-of" (snapshot → sandbox),
// "forked-from" (sandbox → snapshot), "rolled-back-to" (sandbox →
// snapshot), "promoted-from" (sandbox → fork), "created-from" (sandbox →
// template or snapshot).
type LineageEdge struct {
	Kind string    `json:"kind"`
	From string    `json:"from"`
	To   string    `json:"to"`
	At   time.Time `json:"at"`
}

// Lineage answers GET /sandboxes/{id}/lineage.
type Lineage struct {
	Family   string        `json:"family"`
	Template string        `json:"templateID"`
	Nodes    []LineageNode `json:"nodes"`
	Edges    []LineageEdge `json:"edges"`
}
