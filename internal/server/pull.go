package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
	"github.com/warrenhq/warren/internal/session"
	"github.com/warrenhq/warren/internal/store"
)

// A pull moves a snapshot between nodes of a fleet without a middle hop:
// POST /snapshots/pull makes this node GET the holder's export itself
// (with the fleet's admin key, acting for the snapshot's team) and import
// it. When this node holds one of the snapshot's ancestors the export is a
// delta against the nearest.
//
// The bytes received are kept in a spool file as they arrive, so a pull
// whose stream breaks continues, when asked again, from the last frame
// boundary it got (the export's ?offset=) instead of from the start. btrfs
// receive itself cannot continue a stream it was cut off from: the import
// runs again from the spool's first byte, which costs this node's disk and
// CPU again but not the network or the holder's reading of it.

// Headers of an export's answer.
const (
	headerBundleIdentity = "X-Warren-Bundle-Identity"
	headerBundleOffset   = "X-Warren-Bundle-Offset"
)

// PullConfig lets a node pull snapshots from its peers.
type PullConfig struct {
	// FleetKey returns the fleet's admin key, sent to peers; nil outside a
	// fleet (the route then answers 501).
	FleetKey func(ctx context.Context) (string, error)
	// CheckPeer admits a peer's endpoint (one of the fleet's nodes) before
	// the fleet's key is sent to it.
	CheckPeer func(ctx context.Context, endpoint string) error
	// SpoolDir keeps the partial bundles of pulls that broke off.
	SpoolDir string
}

// spoolMaxAge is how long a broken pull's bytes wait for a retry.
const spoolMaxAge = time.Hour

type puller struct {
	PullConfig
	snapshots Snapshots
	maxImport int64
	http      *http.Client
	log       *slog.Logger

	mu      sync.Mutex
	running map[string]chan struct{} // team/snapshot → closed when its pull ends
}

// one waits until no other pull of key runs here (two would write one
// spool) and marks this one running; done ends it.
func (p *puller) one(ctx context.Context, key string) (done func(), err error) {
	for {
		p.mu.Lock()
		ch, busy := p.running[key]
		if !busy {
			if p.running == nil {
				p.running = map[string]chan struct{}{}
			}
			mine := make(chan struct{})
			p.running[key] = mine
			p.mu.Unlock()
			return func() {
				p.mu.Lock()
				delete(p.running, key)
				p.mu.Unlock()
				close(mine)
			}, nil
		}
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for another pull of the snapshot: %w", ctx.Err())
		}
	}
}

type pullRequest struct {
	From     string `json:"from"`
	Snapshot string `json:"snapshot"`
	Team     string `json:"team"`
	// Memory "require" refuses a snapshot whose memory image this node
	// cannot restore (else its files are pulled alone).
	Memory string `json:"memory,omitempty"`

	// dropped, if set, is told why the snapshot's memory image was not
	// kept (for the answer).
	dropped *string
}

func (p pullRequest) validate() error {
	u, err := url.Parse(p.From)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("from %q is not a peer's endpoint URL (http://host:port): %w", p.From, errdefs.ErrInvalid)
	}
	if err := ids.Validate("snapshot id", p.Snapshot); err != nil {
		return err
	}
	if p.Memory != "" && p.Memory != memoryRequire {
		return fmt.Errorf("memory %q: a pull takes %q or nothing: %w", p.Memory, memoryRequire, errdefs.ErrInvalid)
	}
	return ids.ValidateName("team", p.Team)
}

// pullSnapshot serves POST /snapshots/pull (admin keys only).
func (s *snapshotRoutes) pullSnapshot(w http.ResponseWriter, r *http.Request) {
	var dropped string
	snap, created, err := s.pullAsked(w, r, &dropped)
	if err != nil {
		writeError(w, r, err)
		return
	}
	status := http.StatusCreated
	if !created {
		status = http.StatusOK
	}
	out := snapshotOf(snap)
	out.MemoryDropped = dropped
	writeJSON(w, status, out)
}

// pullAsked carries out the pull a request's body asks for; dropped, if
// set, is told why the snapshot's memory image was not kept.
func (s *snapshotRoutes) pullAsked(w http.ResponseWriter, r *http.Request, dropped *string) (store.Snapshot, bool, error) {
	if s.pull == nil || s.pull.FleetKey == nil {
		return store.Snapshot{}, false, fmt.Errorf("pulling snapshots from peers needs node mode (warren serve --cluster kubernetes), where the fleet's admin key authenticates node to node: %w", errdefs.ErrUnsupported)
	}
	var req pullRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return store.Snapshot{}, false, err
	}
	if err := req.validate(); err != nil {
		return store.Snapshot{}, false, err
	}
	if s.pull.CheckPeer != nil {
		if err := s.pull.CheckPeer(r.Context(), req.From); err != nil {
			return store.Snapshot{}, false, err
		}
	}
	req.dropped = dropped
	return s.pull.pull(r.Context(), req)
}

// pull brings req's snapshot here, resuming a broken earlier pull of it.
func (p *puller) pull(ctx context.Context, req pullRequest) (store.Snapshot, bool, error) {
	done, err := p.one(ctx, req.Team+"/"+req.Snapshot)
	if err != nil {
		return store.Snapshot{}, false, err
	}
	defer done()
	if held, err := p.snapshots.GetSnapshot(ctx, req.Team, req.Snapshot); err == nil && usableHere(held) {
		return held, false, nil
	}
	key, err := p.FleetKey(ctx)
	if err != nil {
		return store.Snapshot{}, false, fmt.Errorf("the fleet's admin key: %w", err)
	}
	p.dropStaleSpools()
	sp, res, err := p.resume(ctx, req, key)
	if err != nil {
		return store.Snapshot{}, false, err
	}
	if res == nil {
		if sp, res, err = p.start(ctx, req, key); err != nil {
			return store.Snapshot{}, false, err
		}
	}
	defer res.Body.Close()
	return p.importSpooled(ctx, req, sp, res.Body)
}

// usableHere says whether a held snapshot can be used (not deleted, not
// half made).
func usableHere(s store.Snapshot) bool {
	return s.State == session.SnapReady || s.State == session.SnapArchived
}

// export asks the peer for the bundle of req's snapshot (a delta against
// base when set) from offset on.
func (p *puller) export(ctx context.Context, req pullRequest, key, base string, offset int64, identity string) (*http.Response, error) {
	return p.exportQuery(ctx, req, key, base, offset, identity, false)
}

// exportQuery is export, of the header alone when head is set.
func (p *puller) exportQuery(ctx context.Context, req pullRequest, key, base string, offset int64, identity string, head bool) (*http.Response, error) {
	q := url.Values{"team": {req.Team}}
	if head {
		q.Set("head", "true")
	}
	if base != "" {
		q.Set("base", base)
	}
	if offset > 0 {
		q.Set("offset", strconv.FormatInt(offset, 10))
		q.Set("identity", identity)
	}
	u := strings.TrimRight(req.From, "/") + "/snapshots/" + url.PathEscape(req.Snapshot) + "/export?" + q.Encode()
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("peer %s: %v: %w", req.From, err, errdefs.ErrInvalid)
	}
	hr.Header.Set("X-API-Key", key)
	res, err := p.http.Do(hr)
	if err != nil {
		return nil, fmt.Errorf("export snapshot %s from peer %s: %v: %w", req.Snapshot, req.From, err, errdefs.ErrUnavailable)
	}
	if res.StatusCode != http.StatusOK {
		defer res.Body.Close()
		return nil, peerError(req, res)
	}
	return res, nil
}

// peerError words a peer's refusal, keeping its kind.
func peerError(req pullRequest, res *http.Response) error {
	var e client.Error
	b, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	msg := strings.TrimSpace(string(b))
	if json.Unmarshal(b, &e) == nil && e.Message != "" {
		msg = e.Message
	}
	kind := errdefs.ErrUnavailable
	switch res.StatusCode {
	case http.StatusNotFound:
		kind = errdefs.ErrNotFound
	case http.StatusUnauthorized, http.StatusForbidden:
		// The fleet's key was refused: the peer is not of this fleet, or
		// has not synced the key yet. Not the caller's fault.
		kind = errdefs.ErrUnavailable
	case http.StatusBadRequest:
		kind = errdefs.ErrInvalid
	case http.StatusConflict:
		kind = errdefs.ErrConflict
	case http.StatusNotImplemented:
		kind = errdefs.ErrUnsupported
	}
	return fmt.Errorf("peer %s answered the export of snapshot %s with %s: %s: %w", req.From, req.Snapshot, res.Status, msg, kind)
}
