package server

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/session"
	"github.com/warrenhq/warren/internal/storage"
	"github.com/warrenhq/warren/internal/store"
)

// snapshotRoutes serve snapshots, turns, rollback, fork, promote, diff
// and lineage (lineage.go).
type snapshotRoutes struct {
	sandboxViews
	snapshots Snapshots
	// deleteTemplate serves DELETE /templates/{id} for an id that is no
	// snapshot of the caller's team (the admin routes', admin keys only).
	deleteTemplate http.HandlerFunc
	maxImport      int64 // bytes of one imported bundle (--max-import-mb)
	log            *slog.Logger
	pull           *puller

	// deleteBuilt deletes a template the team built from steps and
	// reports whether the id named one (templatebuilds.go).
	deleteBuilt func(w http.ResponseWriter, r *http.Request) bool
}

func snapshotOf(s store.Snapshot) client.Snapshot {
	out := client.Snapshot{
		SnapshotID:      s.ID,
		Names:           []string{},
		SandboxID:       s.SandboxID,
		Family:          s.Family,
		Name:            s.Name,
		Kind:            string(s.Kind),
		Turn:            s.Turn,
		ParentID:        s.ParentID,
		Template:        s.Template,
		State:           string(s.State),
		Labels:          s.Labels,
		ExclusiveBytes:  s.ExclusiveBytes,
		ReferencedBytes: s.ReferencedBytes,
		CreatedAt:       s.CreatedAt,
		MemoryBytes:     s.MemoryBytes,
	}
	if s.Name != "" {
		out.Names = []string{s.Name}
	}
	if !s.DeletedAt.IsZero() {
		t := s.DeletedAt
		out.DeletedAt = &t
	}
	return out
}

// writeTaken answers a snapshot just taken: 201 with how long the sandbox
// was frozen.
func writeTaken(w http.ResponseWriter, res session.SnapshotResult) {
	out := snapshotOf(res.Snapshot)
	out.FrozenMs = float64(res.Frozen.Microseconds()) / 1000
	writeJSON(w, http.StatusCreated, out)
}

func (s *snapshotRoutes) createSnapshot(w http.ResponseWriter, r *http.Request) {
	var body client.NewSnapshot
	if err := decodeJSON(w, r, &body); err != nil {
		writeError(w, r, err)
		return
	}
	res, err := s.snapshots.Snapshot(r.Context(), teamOf(r), r.PathValue("id"), session.SnapshotRequest{Name: body.Name, Labels: body.Labels, Memory: body.Memory})
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeTaken(w, res)
}

func (s *snapshotRoutes) createTurn(w http.ResponseWriter, r *http.Request) {
	res, err := s.snapshots.Turn(r.Context(), teamOf(r), r.PathValue("id"))
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeTaken(w, res)
}

func (s *snapshotRoutes) listSnapshots(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, err := pageLimit(r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	f := store.SnapshotFilter{SandboxID: q.Get("sandboxID"), Name: q.Get("name"), After: q.Get("nextToken")}
	for _, st := range q["state"] {
		for _, one := range strings.Split(st, ",") {
			switch store.SnapshotState(one) {
			case session.SnapReady, session.SnapArchived, session.SnapDeleted:
				f.States = append(f.States, store.SnapshotState(one))
			default:
				writeError(w, r, fmt.Errorf("state %q: want ready, archived or deleted: %w", one, errdefs.ErrInvalid))
				return
			}
		}
	}
	writePage(w, r, limit, func(n int) ([]store.Snapshot, error) {
		f.Limit = n
		return s.snapshots.ListSnapshots(r.Context(), teamOf(r), f)
	}, snapshotOf)
}

func (s *snapshotRoutes) getSnapshot(w http.ResponseWriter, r *http.Request) {
	snap, err := s.snapshots.GetSnapshot(r.Context(), teamOf(r), r.PathValue("id"))
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, snapshotOf(snap))
}

func (s *snapshotRoutes) deleteSnapshot(w http.ResponseWriter, r *http.Request) {
	if err := s.snapshots.DeleteSnapshot(r.Context(), teamOf(r), r.PathValue("id")); err != nil {
		writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// deleteTemplateOrSnapshot serves E2B's DELETE /templates/{id}: the SDK
// deletes snapshots through it. A team's snapshot id deletes the snapshot;
// anything else is a template, which only an admin may delete.
func (s *snapshotRoutes) deleteTemplateOrSnapshot(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := s.snapshots.GetSnapshot(r.Context(), teamOf(r), id); err == nil {
		s.deleteSnapshot(w, r)
		return
	}
	if s.deleteBuilt != nil && s.deleteBuilt(w, r) {
		return
	}
	s.deleteTemplate(w, r)
}

func (s *snapshotRoutes) rollback(w http.ResponseWriter, r *http.Request) {
	var body client.RollbackRequest
	if err := decodeJSON(w, r, &body); err != nil {
		writeError(w, r, err)
		return
	}
	rec, err := s.snapshots.Rollback(r.Context(), teamOf(r), r.PathValue("id"), body.SnapshotID,
		session.RollbackOptions{Force: body.Force, FilesOnly: body.FilesOnly})
	if err != nil {
		writeError(w, r, err)
		return
	}
	out := client.RollbackResult{Sandbox: s.detailOf(rec), SnapshotID: body.SnapshotID, ProcessesRestarted: true}
	if snap, err := s.snapshots.GetSnapshot(r.Context(), teamOf(r), body.SnapshotID); err == nil && snap.MemoryBytes > 0 && !body.FilesOnly {
		out.ProcessesRestarted, out.ProcessesRestored = false, true
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *snapshotRoutes) promote(w http.ResponseWriter, r *http.Request) {
	rec, from, prev, err := s.snapshots.Promote(r.Context(), teamOf(r), r.PathValue("id"))
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, client.RollbackResult{Sandbox: s.detailOf(rec), SnapshotID: from, ProcessesRestarted: true, PreviousSnapshotID: prev})
}

func (s *snapshotRoutes) fork(w http.ResponseWriter, r *http.Request) {
	var in struct {
		client.ForkRequest
		// Count shadows the embedded one, to tell an absent count (one
		// fork) from an explicit 0 (refused).
		Count *int `json:"count"`
	}
	if err := decodeJSON(w, r, &in); err != nil {
		writeError(w, r, err)
		return
	}
	body := in.ForkRequest
	if in.Count != nil {
		if *in.Count <= 0 {
			writeError(w, r, fmt.Errorf("count %d: want at least 1 fork (omit count for one): %w", *in.Count, errdefs.ErrInvalid))
			return
		}
		body.Count = *in.Count
	}
	req := session.ForkRequest{SnapshotID: body.SnapshotID, Count: body.Count, Metadata: body.Metadata, Memory: body.Memory, FilesOnly: body.FilesOnly, Devices: body.Devices}
	timeout, err := runTimeout(s.snapshots, body.Timeout)
	if err != nil {
		writeError(w, r, err)
		return
	}
	req.Timeout = timeout
	_, results, err := s.snapshots.Fork(r.Context(), teamOf(r), r.PathValue("id"), req)
	if err != nil {
		writeError(w, r, err)
		return
	}
	out := make([]client.ForkResult, 0, len(results))
	for _, res := range results {
		if res.Err != nil {
			status := statusOf(res.Err)
			out = append(out, client.ForkResult{Error: &client.Error{Code: status, Message: messageOf(res.Err)}})
			continue
		}
		sb := s.sandboxOf(res.Sandbox)
		out = append(out, client.ForkResult{Sandbox: &sb})
	}
	writeJSON(w, http.StatusCreated, out)
}

// Content diffs are made only for small files.
const (
	maxContentDiffFile  = 256 << 10
	maxContentDiffTotal = 4 << 20
)

func (s *snapshotRoutes) diff(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	to := r.URL.Query().Get("to")
	res, err := s.snapshots.Diff(r.Context(), teamOf(r), r.PathValue("id"), to)
	if err != nil {
		writeError(w, r, err)
		return
	}
	out := client.Diff{From: res.From, To: res.To, Changes: make([]client.DiffEntry, 0, len(res.Changes))}
	content := r.URL.Query().Get("content") == "true"
	budget := maxContentDiffTotal
	for _, c := range res.Changes {
		e := client.DiffEntry{Path: c.Path, Change: string(c.Kind), Type: c.Type, Size: c.Size, OldSize: c.OldSize, Mode: c.Mode, OldMode: c.OldMode}
		switch c.Kind {
		case storage.ChangeAdded:
			out.Added++
		case storage.ChangeModified:
			out.Modified++
		case storage.ChangeRemoved:
			out.Removed++
		}
		if content && c.Type == "file" && budget > 0 {
			e.Diff = s.contentDiff(res, c, &budget)
		}
		out.Changes = append(out.Changes, e)
	}
	out.TookMs = float64(time.Since(start).Microseconds()) / 1000
	writeJSON(w, http.StatusOK, out)
}
