package session

// The registry: what the parts of the session service share (see the
// type). Lookup is in lookup.go, admission in admission.go.

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/keylock"
	"github.com/warrenhq/warren/internal/runtime"
	"github.com/warrenhq/warren/internal/store"
)

// registry is what every part of the session service shares: the
// configuration, the sandboxes this daemon runs (live) and the calls in
// flight in them (running), both under mu, the per-sandbox locks, and the
// records' lookup, events and lineage. Admission (admission.go) is its
// job too, so that the checks and the counting are one critical section.
type registry struct {
	cfg   Config
	store registryStore
	host  registryHost
	log   *slog.Logger

	createMu sync.Mutex // makes count-then-insert atomic for the sandbox and team limits
	// teamPending is what admitted steps add to teams' usage before their
	// records show it (teams.go); under createMu.
	teamPending map[string]demand

	mu      sync.Mutex
	live    map[string]*liveSandbox
	sbLocks keylock.Locks  // serialises snapshot, rollback and delete per sandbox
	running map[string]int // commands in flight per sandbox

	// autoResume resumes a paused sandbox with autoResume for a call that
	// needs it (the lifecycle's resume).
	autoResume func(ctx context.Context, team, id string) error
}

// detachAll closes the agent connections of the live sandboxes and forgets
// them, leaving the sandboxes running.
func (r *registry) detachAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, sb := range r.live {
		if sb.Agent != nil {
			sb.Agent.Close()
		}
		delete(r.live, id)
	}
}

// lockSandbox serialises the operations that change a sandbox's tree or
// life (snapshot, rollback, delete) and returns the unlock.
func (r *registry) lockSandbox(id string) func() { return r.sbLocks.Lock(id) }

// reserveWith runs create (which writes rec's record) if the server's
// sandbox limit and the team's limits have room.
func (r *registry) reserveWith(ctx context.Context, rec store.Sandbox, create func() error) error {
	r.createMu.Lock()
	defer r.createMu.Unlock()
	n, err := r.store.CountSandboxes(ctx, liveStates...)
	if err != nil {
		return err
	}
	if n >= r.cfg.MaxSandboxes {
		return fmt.Errorf("%d sandboxes are running, the most this server allows (--max-sandboxes); delete one first: %w", n, errdefs.ErrResourceExhausted)
	}
	if err := r.checkTeamLocked(ctx, rec.Team, demandOf(rec)); err != nil {
		return err
	}
	return create()
}

func (r *registry) fail(ctx context.Context, id, reason string) {
	rec, _ := r.store.GetSandbox(ctx, id)
	if err := r.store.UpdateSandboxState(ctx, id, sourcesOf(StateFailed), StateFailed, reason); err != nil {
		r.log.Warn("mark sandbox failed", "sandbox", id, "err", err)
		return
	}
	if rec.ID != "" {
		r.event(ctx, rec, "failed", rec.State, StateFailed, CauseError, reason)
	}
}

func (r *registry) limitsFor(l runtime.Limits) runtime.Limits {
	d := r.cfg.DefaultLimits
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

// event records one step of a sandbox's life. It is best effort: a failed
// write is logged, never returned (the step itself happened).
func (r *registry) event(ctx context.Context, rec store.Sandbox, kind string, from, to store.SandboxState, cause, detail string) {
	e := store.Event{SandboxID: rec.ID, Team: rec.Team, At: r.cfg.Now().UTC(), Kind: kind, From: from, To: to, Cause: cause, Detail: detail}
	if err := r.store.AddEvent(context.WithoutCancel(ctx), e); err != nil {
		r.log.Warn("record sandbox event", "sandbox", rec.ID, "kind", kind, "err", err)
	}
	if r.cfg.OnEvent != nil {
		r.cfg.OnEvent(e)
	}
}

func (r *registry) edge(ctx context.Context, family string, kind store.EdgeKind, from, to string) {
	if err := r.store.AddLineageEdge(ctx, store.LineageEdge{Family: family, Kind: kind, From: from, To: to, At: r.cfg.Now().UTC()}); err != nil {
		r.log.Warn("record lineage", "family", family, "kind", kind, "err", err)
	}
}

// CheckTimeout checks a run timeout a caller asks for: not negative, and
// not 0 (never) when the server requires one (Config.RequireTimeout). The
// API checks with it before acting, so that a resume with a refused
// timeout does not resume first.
func (r *registry) CheckTimeout(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("timeout must not be negative: %w", errdefs.ErrInvalid)
	}
	if d == 0 && r.cfg.RequireTimeout {
		return fmt.Errorf("timeout 0 (never expire) is turned off on this server (warren serve --allow-no-timeout=false): give a timeout of at least 1 second: %w", errdefs.ErrInvalid)
	}
	return nil
}
