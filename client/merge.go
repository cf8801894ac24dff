package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
)

// MergeRequest is the body of POST /sandboxes/{id}/merge.
type MergeRequest struct {
	// From is the fork (a sandbox: its live tree) or snapshot to merge.
	From string `json:"from"`
	// Base is the common ancestor; by default From's fork point.
	Base string `json:"base,omitempty"`
	// Strategy resolves conflicts: three-way (default: conflict markers
	// in text files), ours, theirs or union.
	Strategy string `json:"strategy,omitempty"`
	// Paths makes the merge a cherry-pick: these paths are copied from
	// From as they are (with what is below them), without ancestor logic.
	Paths []string `json:"paths,omitempty"`
	// DryRun reports what a merge would do without writing.
	DryRun bool `json:"dryRun,omitempty"`
	// Force merges even while commands run in the sandbox (they keep
	// running and see their files change).
	Force bool `json:"force,omitempty"`
}

// MergeEntry is one path a merge looked at.
type MergeEntry struct {
	Path string `json:"path"`
	// Outcome is taken (one side's version), merged (a clean line merge)
	// or conflict.
	Outcome string `json:"outcome"`
	// Resolution settles a conflict: markers, ours, theirs, union or
	// kept-ours (reported, our version left).
	Resolution string `json:"resolution,omitempty"`
	Reason     string `json:"reason,omitempty"`
}

// MergeResult answers a merge.
type MergeResult struct {
	From      string       `json:"from"`
	Base      string       `json:"base,omitempty"`
	DryRun    bool         `json:"dryRun,omitempty"`
	Conflicts int          `json:"conflicts"`
	Entries   []MergeEntry `json:"entries"`
	// BeforeSnapshotID is the turn snapshot taken before the merge (a
	// rollback to it undoes the merge); AfterSnapshotID the one after.
	BeforeSnapshotID string `json:"beforeSnapshotID,omitempty"`
	AfterSnapshotID  string `json:"afterSnapshotID,omitempty"`
}

// ForkVerdict judges one fork (GET /sandboxes/{id}/forks/summary).
type ForkVerdict struct {
	SandboxID    string `json:"sandboxID"`
	ForkPoint    string `json:"forkPoint"`
	State        string `json:"state"`
	Added        int    `json:"added"`
	Modified     int    `json:"modified"`
	Removed      int    `json:"removed"`
	BytesChanged int64  `json:"bytesChanged"`
	// Divergence is the bytes changed over the bytes of the fork point's
	// files, capped at 1.
	Divergence    float64 `json:"divergence"`
	MergesCleanly bool    `json:"mergesCleanly"`
	Conflicts     int     `json:"conflicts"`
	// Recommendation is discard, review or merge.
	Recommendation string `json:"recommendation"`
	Reason         string `json:"reason"`
}

// ForksSummary is the answer of GET /sandboxes/{id}/forks/summary.
type ForksSummary struct {
	SandboxID string        `json:"sandboxID"`
	Threshold float64       `json:"threshold"`
	Forks     []ForkVerdict `json:"forks"`
}

// Merge merges a fork's (or snapshot's) changes into sandbox id's live
// tree, or cherry-picks paths from it.
func (s *SnapshotsService) Merge(ctx context.Context, id string, in MergeRequest) (MergeResult, error) {
	var res MergeResult
	r, err := jsonBody(http.MethodPost, sandboxPath(id, "/merge"), in)
	if err != nil {
		return res, err
	}
	err = s.t.call(ctx, r, &res)
	return res, err
}

// ForksSummary judges every fork of sandbox id. threshold 0 keeps the
// server's default (0.8).
func (s *SnapshotsService) ForksSummary(ctx context.Context, id string, threshold float64) (ForksSummary, error) {
	var out ForksSummary
	q := url.Values{}
	if threshold != 0 {
		q.Set("threshold", strconv.FormatFloat(threshold, 'g', -1, 64))
	}
	err := s.t.call(ctx, request{method: http.MethodGet, path: sandboxPath(id, "/forks/summary"), query: q}, &out)
	return out, err
}
