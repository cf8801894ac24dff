package server

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/session"
)

// merge serves POST /sandboxes/{id}/merge.
func (s *snapshotRoutes) merge(w http.ResponseWriter, r *http.Request) {
	var body client.MergeRequest
	if err := decodeJSON(w, r, &body); err != nil {
		writeError(w, r, err)
		return
	}
	res, err := s.snapshots.Merge(r.Context(), teamOf(r), r.PathValue("id"), session.MergeRequest{
		From: body.From, Base: body.Base, Strategy: body.Strategy, Paths: body.Paths, DryRun: body.DryRun, Force: body.Force})
	if err != nil {
		writeError(w, r, err)
		return
	}
	out := client.MergeResult{From: res.From, Base: res.Base, DryRun: body.DryRun, Conflicts: res.Conflicts,
		Entries: make([]client.MergeEntry, len(res.Entries)), BeforeSnapshotID: res.Before, AfterSnapshotID: res.After}
	for i, e := range res.Entries {
		out.Entries[i] = client.MergeEntry{Path: e.Path, Outcome: string(e.Outcome), Resolution: e.Resolution, Reason: e.Reason}
	}
	writeJSON(w, http.StatusOK, out)
}

// forksSummary serves GET /sandboxes/{id}/forks/summary.
func (s *snapshotRoutes) forksSummary(w http.ResponseWriter, r *http.Request) {
	threshold := session.DefaultDivergenceThreshold
	if v := r.URL.Query().Get("threshold"); v != "" {
		t, err := strconv.ParseFloat(v, 64)
		if err != nil {
			writeError(w, r, fmt.Errorf("threshold %q: want a number in (0, 1]: %w", v, errdefs.ErrInvalid))
			return
		}
		threshold = t
	}
	verdicts, err := s.snapshots.ForksSummary(r.Context(), teamOf(r), r.PathValue("id"), threshold)
	if err != nil {
		writeError(w, r, err)
		return
	}
	out := client.ForksSummary{SandboxID: r.PathValue("id"), Threshold: threshold, Forks: make([]client.ForkVerdict, len(verdicts))}
	for i, v := range verdicts {
		out.Forks[i] = client.ForkVerdict{SandboxID: v.Sandbox, ForkPoint: v.ForkPoint, State: string(v.State),
			Added: v.Added, Modified: v.Modified, Removed: v.Removed, BytesChanged: v.BytesChanged,
			Divergence: v.Divergence, MergesCleanly: v.MergesCleanly, Conflicts: v.Conflicts,
			Recommendation: v.Recommendation, Reason: v.Reason}
	}
	writeJSON(w, http.StatusOK, out)
}
