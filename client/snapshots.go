package client

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"
)

// SnapshotsService takes, lists and deletes snapshots, and rolls back, forks,
// promotes, diffs and traces sandboxes by them (the API's snapshots routes).
type SnapshotsService struct{ t *transport }

// Create takes a named (or, without a name, unnamed) snapshot of a
// sandbox's live tree.
func (s *SnapshotsService) Create(ctx context.Context, id string, in NewSnapshot) (Snapshot, error) {
	var snap Snapshot
	r, err := jsonBody(http.MethodPost, sandboxPath(id, "/snapshots"), in)
	if err != nil {
		return snap, err
	}
	err = s.t.call(ctx, r, &snap)
	return snap, err
}

// Turn ends an agent turn: it takes the sandbox's next turn snapshot
// (kind "turn", named "turn-N").
func (s *SnapshotsService) Turn(ctx context.Context, id string) (Snapshot, error) {
	var snap Snapshot
	err := s.t.call(ctx, request{method: http.MethodPost, path: sandboxPath(id, "/turns")}, &snap)
	return snap, err
}

// SnapshotListOptions filter and page GET /snapshots.
type SnapshotListOptions struct {
	// SandboxID keeps the snapshots of one sandbox.
	SandboxID string
	// Name keeps the snapshots with this name.
	Name string
	// States keeps the snapshots in one of these states ("ready",
	// "archived", "deleted"); none means the server's default (the
	// usable ones: ready and archived).
	States []string
	// Limit is the page size (0 = the server's default).
	Limit int
	// NextToken continues a listing from the cursor a previous page returned.
	NextToken string
}

// List returns one page of snapshots and the cursor of the next
// page ("" when this was the last).
func (s *SnapshotsService) List(ctx context.Context, opts SnapshotListOptions) ([]Snapshot, string, error) {
	q := url.Values{}
	if opts.SandboxID != "" {
		q.Set("sandboxID", opts.SandboxID)
	}
	if opts.Name != "" {
		q.Set("name", opts.Name)
	}
	for _, st := range opts.States {
		q.Add("state", st)
	}
	if opts.Limit > 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.NextToken != "" {
		q.Set("nextToken", opts.NextToken)
	}
	resp, err := s.t.send(ctx, request{method: http.MethodGet, path: "/snapshots", query: q})
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	var out []Snapshot
	if err := decodeJSON(resp, &out); err != nil {
		return nil, "", err
	}
	return out, resp.Header.Get("X-Next-Token"), nil
}

// Get describes one snapshot.
func (s *SnapshotsService) Get(ctx context.Context, id string) (Snapshot, error) {
	var snap Snapshot
	err := s.t.call(ctx, request{method: http.MethodGet, path: snapshotPath(id, "")}, &snap)
	return snap, err
}

// Delete removes a snapshot's tree; the lineage keeps it as a
// tombstone (state "deleted").
func (s *SnapshotsService) Delete(ctx context.Context, id string) error {
	return s.t.call(ctx, request{method: http.MethodDelete, path: snapshotPath(id, "")}, nil)
}

// Rollback replaces a sandbox's live tree with a snapshot of it. In the
// native runtime its processes are restarted (the answer says so).
func (s *SnapshotsService) Rollback(ctx context.Context, id string, in RollbackRequest) (RollbackResult, error) {
	var res RollbackResult
	r, err := jsonBody(http.MethodPost, sandboxPath(id, "/rollback"), in)
	if err != nil {
		return res, err
	}
	err = s.t.call(ctx, r, &res)
	return res, err
}

// Fork starts new sandboxes from a snapshot of id (or from its live state).
// The answer has one element per requested fork, each a sandbox or an
// error: a fork that failed does not fail the call.
func (s *SnapshotsService) Fork(ctx context.Context, id string, in ForkRequest) ([]ForkResult, error) {
	var out []ForkResult
	r, err := jsonBody(http.MethodPost, sandboxPath(id, "/fork"), in)
	if err != nil {
		return nil, err
	}
	err = s.t.call(ctx, r, &out)
	return out, err
}

// Diff compares snapshot from with snapshot to, or with the sandbox's live
// tree when to is "live" or "". With content, small text files carry a
// unified diff.
func (s *SnapshotsService) Diff(ctx context.Context, from, to string, content bool) (Diff, error) {
	var d Diff
	if to == "" {
		to = "live"
	}
	q := url.Values{"to": {to}}
	if content {
		q.Set("content", "true")
	}
	err := s.t.call(ctx, request{method: http.MethodGet, path: snapshotPath(from, "/diff"), query: q}, &d)
	return d, err
}

// Lineage returns the family tree a sandbox belongs to: its template, the
// sandboxes and snapshots of the family, and how they are related.
func (s *SnapshotsService) Lineage(ctx context.Context, id string) (Lineage, error) {
	var l Lineage
	err := s.t.call(ctx, request{method: http.MethodGet, path: sandboxPath(id, "/lineage")}, &l)
	return l, err
}

// Promote makes a fork's tree its parent's. The answer describes the
// parent; its PreviousSnapshotID keeps the state that was replaced.
func (s *SnapshotsService) Promote(ctx context.Context, id string) (RollbackResult, error) {
	var res RollbackResult
	err := s.t.call(ctx, request{method: http.MethodPost, path: sandboxPath(id, "/promote")}, &res)
	return res, err
}

// snapshotPath returns /snapshots/{id}{suffix} with id escaped.
func snapshotPath(id, suffix string) string {
	return "/snapshots/" + url.PathEscape(id) + suffix
}

// Export streams a snapshot as a portable bundle, for Import on another
// daemon: whole, or as a delta against base (a snapshot that daemon
// imported before) when base is set, with its memory image if it has one.
// The caller reads the bundle to its end and closes it; a bundle cut short
// is refused by Import, so a failed transfer is retried from the start.
func (s *SnapshotsService) Export(ctx context.Context, id, base string) (io.ReadCloser, error) {
	return s.ExportWith(ctx, id, ExportOptions{Base: base})
}

// ExportOptions shape an export.
type ExportOptions struct {
	Base string // send a delta against this snapshot
	// FilesOnly leaves a snapshot's memory image out of the bundle.
	FilesOnly bool
}

// ExportWith is Export with options.
func (s *SnapshotsService) ExportWith(ctx context.Context, id string, o ExportOptions) (io.ReadCloser, error) {
	q := url.Values{}
	if o.Base != "" {
		q.Set("base", o.Base)
	}
	if o.FilesOnly {
		q.Set("memory", "omit")
	}
	resp, err := s.t.send(ctx, request{method: http.MethodGet, path: snapshotPath(id, "/export"), query: q})
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// Import rebuilds a snapshot from a bundle Export wrote, as a snapshot of
// the caller's team under its own id (a new one when rename is set and
// the id is taken). Importing a snapshot held already answers it. A memory
// image the daemon cannot restore (no gvisor there) is dropped: the answer's
// MemoryDropped says so.
func (s *SnapshotsService) Import(ctx context.Context, bundle io.Reader, rename bool) (Snapshot, error) {
	return s.ImportWith(ctx, bundle, ImportOptions{Rename: rename})
}

// ImportOptions shape an import.
type ImportOptions struct {
	Rename bool // take a new id when the bundle's is taken
	// RequireMemory refuses (501) a bundle whose memory image the daemon
	// cannot restore, instead of importing its files alone.
	RequireMemory bool
}

// ImportWith is Import with options.
func (s *SnapshotsService) ImportWith(ctx context.Context, bundle io.Reader, o ImportOptions) (Snapshot, error) {
	q := url.Values{}
	if o.Rename {
		q.Set("rename", "true")
	}
	if o.RequireMemory {
		q.Set("memory", "require")
	}
	var snap Snapshot
	err := s.t.call(ctx, request{method: http.MethodPost, path: "/snapshots/import", query: q, body: largeWrites{bundle},
		contentType: "application/vnd.warren.snapshot-bundle"}, &snap)
	return snap, err
}

// largeWrites hands a request body to the transport 1 MiB at a time. The
// transport copies a body through io.Copy's 32 KiB buffer otherwise, and
// each piece becomes a chunk of its own and two writes to the connection:
// for a bundle of a GiB, some 65,000 system calls.
type largeWrites struct{ r io.Reader }

func (l largeWrites) Read(p []byte) (int, error) { return l.r.Read(p) }

func (l largeWrites) WriteTo(w io.Writer) (int64, error) {
	return io.CopyBuffer(w, struct{ io.Reader }{l.r}, make([]byte, 1<<20))
}
