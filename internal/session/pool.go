package session

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
	"github.com/warrenhq/warren/internal/network"
	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/startgate"
	"github.com/warrenhq/warren/internal/store"
)

// warmPools keeps the pools of ready sandboxes a create may claim, and
// refills them in the background.
type warmPools struct {
	*registry
	host  poolHost
	store poolStore

	// pools may be replaced at run time (SetPools, node mode's
	// SandboxPool objects): read it through pool and allPools.
	poolsMu sync.Mutex
	pools   map[string]*pool
	refill  chan struct{}
}

// stopPooled stops the pooled sandboxes: they belong to nobody, and are
// stopped rather than left for the next daemon to find and remove.
func (w *warmPools) stopPooled() {
	for _, p := range w.allPools() {
		p.mu.Lock()
		ready := p.ready
		p.ready = nil
		ready = append(ready, p.stale...)
		p.stale = nil
		p.mu.Unlock()
		for _, e := range ready {
			sb := e.sb
			if err := w.host.Destroy(context.Background(), sb.ID, sb.Agent); err != nil {
				w.log.Warn("stop a pooled sandbox", "sandbox", sb.ID, "err", err)
			}
		}
	}
}

// PoolConfig keeps ready sandboxes of one template.
type PoolConfig struct {
	Template string
	// Min ready sandboxes are kept; Max caps how many exist at once (0 =
	// Min).
	Min, Max int
	// TTL replaces a ready sandbox that waited this long (0 = never).
	TTL time.Duration
	// Network pools sandboxes with a network namespace on the bridge and
	// nothing open: only creates that ask for a network claim them, and
	// get their policy applied (an nftables update, no namespace to make).
	Network bool
	// Runtime of the pooled sandboxes ("" = the template's, else the
	// server's default). Only creates that resolve to it claim them.
	Runtime string
}

// poolKey names the pool of a template's sandboxes with or without a
// network, on a runtime the pool names ("" for one that follows the
// template or the server's default).
func poolKey(template string, network bool, runtime string) string {
	if runtime != "" {
		template += "@" + runtime
	}
	if network {
		return template + " (network)"
	}
	return template
}

// PoolStats describes one warm pool.
type PoolStats struct {
	Template string
	// Runtime: the pool's own, else the one its sandboxes were last started
	// on ("" before the first); PinnedRuntime the pool's own ("" when it
	// follows its template or the default).
	Runtime       string
	PinnedRuntime string
	Network       bool
	Min, Max      int
	TTL           time.Duration
	Ready         int
	Expired       int64
	Hits          int64
	Misses        int64
	ClaimP50      time.Duration
	LastFailure   string
}

// pool holds started sandboxes that belong to nobody yet. They have no
// record: a claim writes one; a daemon restart finds them unrecorded and
// removes them, and the pool refills.
type pool struct {
	cfg     PoolConfig
	mu      sync.Mutex
	ready   []pooled
	hits    int64
	misses  int64
	expired int64           // replaced: too old, or their template was rebuilt
	stale   []pooled        // set aside by claims: their template was rebuilt
	claims  []time.Duration // recent claim latencies, bounded
	lastErr string
	runtime string // the runtime its sandboxes were last started on
}

// pooled is a ready sandbox, when it started, and when the template it was
// made from was built (a rebuild replaces it).
type pooled struct {
	sb      *sandbox.Sandbox
	started time.Time
	built   time.Time
	from    *pool // the pool it was claimed from, to go back to
}

const (
	poolRefillBackoff = time.Second
	poolRefillDelay   = 250 * time.Millisecond
)

// newPools builds the pools of the configuration.
func newPools(cfgs []PoolConfig) map[string]*pool {
	out := map[string]*pool{}
	for _, c := range cfgs {
		if c.Max < c.Min {
			c.Max = c.Min
		}
		out[poolKey(c.Template, c.Network, c.Runtime)] = &pool{cfg: c}
	}
	return out
}

// claim takes a ready sandbox of the create's template. Pooled sandboxes
// start with the default limits, no env vars and no disk quota; claimed
// applies the create's own. It returns false on a miss. Sandboxes made from
// an older build of the template are set aside for the pool loop to
// remove, never handed out.
func (w *warmPools) claim(ctx context.Context, req CreateRequest, runtimeName string, tmpl store.Template) (pooled, bool) {
	// A pool of the create's runtime by name, else the template's pool
	// that follows the template or the default.
	p := w.pool(poolKey(req.Template, req.Network != nil, runtimeName))
	if p == nil {
		p = w.pool(poolKey(req.Template, req.Network != nil, ""))
	}
	if p == nil {
		return pooled{}, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if rt, err := w.poolRuntime(p.cfg, tmpl); tmpl.Name == "" || err != nil || runtimeName != rt {
		// Not built (nothing pooled can be of it), or the create asked for
		// another runtime than the pool's.
		p.misses++
		return pooled{}, false
	}
	for len(p.ready) > 0 {
		e := p.ready[len(p.ready)-1]
		p.ready = p.ready[:len(p.ready)-1]
		if !e.built.Equal(tmpl.CreatedAt) {
			p.stale = append(p.stale, e)
			w.wakeRefill()
			continue
		}
		p.hits++
		e.from = p
		return e, true
	}
	p.misses++
	return pooled{}, false
}

func (p *pool) recordClaim(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.claims) >= 256 {
		p.claims = p.claims[1:]
	}
	p.claims = append(p.claims, d)
}

// claimed turns a pooled sandbox into a team's: its record is written
// running at once.
func (w *warmPools) claimed(ctx context.Context, e pooled, rec store.Sandbox, start time.Time) (store.Sandbox, error) {
	sb := e.sb
	rec.ID = sb.ID
	rec.Family = sb.ID
	rec.State = StateRunning
	// The record, its lineage edge and its "created" event in one commit.
	now := w.cfg.Now().UTC()
	ev := store.Event{SandboxID: rec.ID, Team: rec.Team, At: now, Kind: "created", To: StateRunning, Cause: CausePool,
		Detail: "claimed from the warm pool of " + rec.Template}
	edge := store.LineageEdge{Family: rec.Family, Kind: EdgeCreatedFrom, From: rec.ID, To: rec.Template, At: now}
	if err := w.reserveWith(ctx, rec, func() error { return w.store.CreateSandboxRecorded(ctx, rec, edge, ev) }); err != nil {
		// Back to the pool: it is still good (its policy not applied yet).
		p := e.from
		p.mu.Lock()
		p.ready = append(p.ready, e)
		p.mu.Unlock()
		return store.Sandbox{}, err
	}
	if w.cfg.OnEvent != nil {
		w.cfg.OnEvent(ev)
	}
	if err := w.tailor(ctx, sb, rec); err != nil {
		bg := context.WithoutCancel(ctx)
		if derr := w.host.Destroy(bg, rec.ID, sb.Agent); derr != nil {
			w.log.Warn("drop a pooled sandbox that could not be made the claimer's", "sandbox", rec.ID, "err", derr)
		}
		w.fail(bg, rec.ID, "claiming it from the warm pool failed: "+err.Error())
		return store.Sandbox{}, fmt.Errorf("claim a warm sandbox: %w", err)
	}
	w.mu.Lock()
	w.live[rec.ID] = &liveSandbox{Sandbox: sb, team: rec.Team, lastActive: w.cfg.Now()}
	w.mu.Unlock()
	e.from.recordClaim(time.Since(start))
	w.wakeRefill()
	return rec, nil
}

// tailor gives a claimed sandbox what its create asked for beyond the
// pool's defaults: limits, disk quota, env vars and network policy.
func (w *warmPools) tailor(ctx context.Context, sb *sandbox.Sandbox, rec store.Sandbox) error {
	if l := limitsOf(rec); l != w.limitsFor(w.cfg.DefaultLimits) {
		if err := w.host.UpdateLimits(ctx, rec.ID, l); err != nil {
			return fmt.Errorf("set its limits: %w", err)
		}
	}
	if rec.QuotaBytes > 0 {
		if err := w.host.SetQuota(ctx, rec.ID, rec.QuotaBytes); err != nil {
			return err
		}
	}
	if len(rec.Env) > 0 {
		if err := w.host.SetEnv(ctx, sb, rec.Env); err != nil {
			return err
		}
	}
	if p := policyOf(rec); p != nil {
		// The pooled sandbox's namespace opened nothing until now.
		if err := w.host.UpdateNetwork(ctx, rec.ID, *p); err != nil {
			return fmt.Errorf("apply its network policy: %w", err)
		}
	}
	return nil
}

func (w *warmPools) wakeRefill() {
	select {
	case w.refill <- struct{}{}:
	default:
	}
}

// runPools keeps every pool filled until ctx ends. Without pools it only
// waits for SetPools to wake it.
func (w *warmPools) runPools(ctx context.Context) {
	var t *time.Ticker
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for {
		pools := w.allPools()
		for _, p := range pools {
			w.expirePool(ctx, p)
			w.fillPool(ctx, p)
		}
		var tick <-chan time.Time
		if len(pools) > 0 {
			if t == nil {
				t = time.NewTicker(poolRefillBackoff)
			}
			tick = t.C
		}
		select {
		case <-ctx.Done():
			return
		case <-w.refill:
			// Let the sandbox just claimed run its first commands before
			// a refill competes with it for the CPU.
			select {
			case <-ctx.Done():
				return
			case <-time.After(poolRefillDelay):
			}
		case <-tick:
		}
	}
}

// fillPool starts sandboxes until the pool has Min ready (or the server's
// sandbox limit is reached).
func (w *warmPools) fillPool(ctx context.Context, p *pool) {
	for ctx.Err() == nil {
		p.mu.Lock()
		need := p.cfg.Min - len(p.ready)
		room := p.cfg.Max - len(p.ready)
		p.mu.Unlock()
		if need <= 0 || room <= 0 {
			return
		}
		n, err := w.store.CountSandboxes(ctx, liveStates...)
		if err != nil || n+w.pooled() >= w.cfg.MaxSandboxes {
			return
		}
		tmpl, err := w.store.GetTemplate(ctx, p.cfg.Template)
		if err != nil {
			p.mu.Lock()
			p.lastErr = err.Error() // not built yet, most likely
			p.mu.Unlock()
			return
		}
		rt, err := w.poolRuntime(p.cfg, tmpl)
		if err != nil {
			p.mu.Lock()
			p.lastErr = err.Error()
			p.mu.Unlock()
			return
		}
		id := ids.New(20)
		limits := w.limitsFor(w.cfg.DefaultLimits)
		spec := sandbox.Spec{ID: id, Template: p.cfg.Template, Limits: limits, Group: id, Runtime: rt}
		if p.cfg.Network {
			spec.Network = &network.Policy{}
		}
		// A refill's start waits behind the creates clients wait for.
		sb, err := w.host.Create(startgate.WithPriority(ctx, startgate.Background), spec)
		if err != nil {
			p.mu.Lock()
			p.lastErr = err.Error()
			p.mu.Unlock()
			if !errdefs.IsNotFound(err) {
				w.log.Warn("warm pool: start a sandbox", "template", p.cfg.Template, "err", err)
			}
			return
		}
		if err := w.host.PrimeFirstCommand(ctx, sb); err != nil {
			w.log.Debug("warm pool: first command", "sandbox", sb.ID, "err", err)
		}
		p.mu.Lock()
		p.lastErr, p.runtime = "", rt
		p.ready = append(p.ready, pooled{sb: sb, started: w.cfg.Now(), built: tmpl.CreatedAt})
		p.mu.Unlock()
	}
}

// expirePool removes the ready sandboxes that waited longer than the
// pool's TTL or whose template was rebuilt (or removed) since they
// started; fillPool then replaces them.
func (w *warmPools) expirePool(ctx context.Context, p *pool) {
	tmpl, terr := w.store.GetTemplate(ctx, p.cfg.Template)
	if terr != nil && !errdefs.IsNotFound(terr) {
		return // unsure: keep them
	}
	now := w.cfg.Now()
	p.mu.Lock()
	drop := p.stale
	p.stale = nil
	keep := p.ready[:0]
	for _, e := range p.ready {
		tooOld := p.cfg.TTL > 0 && now.Sub(e.started) >= p.cfg.TTL
		if tooOld || terr != nil || !e.built.Equal(tmpl.CreatedAt) {
			drop = append(drop, e)
			continue
		}
		keep = append(keep, e)
	}
	p.ready = keep
	p.expired += int64(len(drop))
	p.mu.Unlock()
	for _, e := range drop {
		if err := w.host.Destroy(ctx, e.sb.ID, e.sb.Agent); err != nil {
			w.log.Warn("warm pool: remove an expired sandbox", "sandbox", e.sb.ID, "err", err)
		}
	}
}

// poolRuntime is the runtime of a pool's sandboxes: the pool's own, else
// the one its template requires, else the server's default (a create that
// resolves to another runtime skips the pool). A pool asking for another
// runtime than its template requires cannot be filled.
func (w *warmPools) poolRuntime(cfg PoolConfig, tmpl store.Template) (string, error) {
	switch {
	case cfg.Runtime != "" && tmpl.Runtime != "" && cfg.Runtime != tmpl.Runtime:
		return "", fmt.Errorf("the pool asks for runtime %s but template %s requires runtime %s: %w", cfg.Runtime, tmpl.Name, tmpl.Runtime, errdefs.ErrInvalid)
	case cfg.Runtime != "":
		return cfg.Runtime, nil
	case tmpl.Runtime != "":
		return tmpl.Runtime, nil
	}
	return w.cfg.RuntimeName, nil
}

func (w *warmPools) pooled() int {
	n := 0
	for _, p := range w.allPools() {
		p.mu.Lock()
		n += len(p.ready)
		p.mu.Unlock()
	}
	return n
}

// PoolStats reports every warm pool.
func (w *warmPools) PoolStats() []PoolStats {
	var out []PoolStats
	for _, p := range w.allPools() {
		p.mu.Lock()
		st := PoolStats{Template: p.cfg.Template, Runtime: cmp.Or(p.cfg.Runtime, p.runtime), PinnedRuntime: p.cfg.Runtime, Network: p.cfg.Network, Min: p.cfg.Min, Max: p.cfg.Max, TTL: p.cfg.TTL,
			Ready: len(p.ready), Hits: p.hits, Misses: p.misses, Expired: p.expired, LastFailure: p.lastErr}
		if len(p.claims) > 0 {
			sorted := append([]time.Duration(nil), p.claims...)
			slices.Sort(sorted)
			st.ClaimP50 = sorted[len(sorted)/2]
		}
		p.mu.Unlock()
		out = append(out, st)
	}
	return out
}
