package session

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
	"github.com/warrenhq/warren/internal/network"
	"github.com/warrenhq/warren/internal/sandbox"
	"github.com/warrenhq/warren/internal/store"
)

// PoolConfig keeps ready sandboxes of one template.
type PoolConfig struct {
	Template string
	// Min ready sandboxes are kept; Max caps how many exist at once (0 =
	// Min).
	Min, Max int
	// Network pools sandboxes with a network namespace on the bridge and
	// nothing open: only creates that ask for a network claim them, and
	// get their policy applied (an nftables update, no namespace to make).
	Network bool
}

// poolKey names the pool of a template's sandboxes with or without a
// network.
func poolKey(template string, network bool) string {
	if network {
		return template + " (network)"
	}
	return template
}

// PoolStats describes one warm pool.
type PoolStats struct {
	Template    string
	Network     bool
	Min, Max    int
	Ready       int
	Hits        int64
	Misses      int64
	ClaimP50    time.Duration
	LastFailure string
}

// pool holds started sandboxes that belong to nobody yet. They have no
// record: a claim writes one; a daemon restart finds them unrecorded and
// removes them, and the pool refills.
type pool struct {
	cfg     PoolConfig
	mu      sync.Mutex
	ready   []*sandbox.Sandbox
	filling int
	hits    int64
	misses  int64
	claims  []time.Duration // recent claim latencies, bounded
	lastErr string
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
		out[poolKey(c.Template, c.Network)] = &pool{cfg: c}
	}
	return out
}

// claim takes a ready sandbox for a create that asks for nothing a pooled
// sandbox cannot give (its own env vars, limits or disk quota are fixed at
// start). It returns nil on a miss.
func (m *Manager) claim(req CreateRequest) *sandbox.Sandbox {
	if req.Runtime != "" && req.Runtime != m.cfg.RuntimeName {
		return nil // pools hold sandboxes of the default runtime
	}
	p := m.pools[poolKey(req.Template, req.Network != nil)]
	if p == nil {
		return nil
	}
	eligible := len(req.Env) == 0 && req.DiskBytes == 0 &&
		m.limitsFor(req.Limits) == m.limitsFor(m.cfg.DefaultLimits)
	p.mu.Lock()
	defer p.mu.Unlock()
	if !eligible || len(p.ready) == 0 {
		p.misses++
		return nil
	}
	sb := p.ready[len(p.ready)-1]
	p.ready = p.ready[:len(p.ready)-1]
	p.hits++
	return sb
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
func (m *Manager) claimed(ctx context.Context, sb *sandbox.Sandbox, rec store.Sandbox, start time.Time) (store.Sandbox, error) {
	rec.ID = sb.ID
	rec.Family = sb.ID
	rec.State = StateRunning
	if err := m.reserve(ctx, rec); err != nil {
		// Back to the pool: it is still good (its policy not applied yet).
		p := m.pools[poolKey(rec.Template, rec.Network != nil)]
		p.mu.Lock()
		p.ready = append(p.ready, sb)
		p.mu.Unlock()
		return store.Sandbox{}, err
	}
	if p := policyOf(rec); p != nil {
		// The pooled sandbox's namespace opened nothing until now.
		if err := m.host.UpdateNetwork(ctx, rec.ID, *p); err != nil {
			bg := context.WithoutCancel(ctx)
			if derr := m.host.Destroy(bg, rec.ID, sb.Agent); derr != nil {
				m.log.Warn("drop a pooled sandbox whose policy could not be applied", "sandbox", rec.ID, "err", derr)
			}
			m.fail(bg, rec.ID, "applying its network policy failed: "+err.Error())
			return store.Sandbox{}, fmt.Errorf("apply the network policy to a pooled sandbox: %w", err)
		}
	}
	m.mu.Lock()
	m.live[rec.ID] = &liveSandbox{Sandbox: sb, team: rec.Team, lastActive: m.cfg.Now()}
	m.mu.Unlock()
	m.edge(context.WithoutCancel(ctx), rec.Family, EdgeCreatedFrom, rec.ID, rec.Template)
	m.event(ctx, rec, "created", "", StateRunning, CausePool, "claimed from the warm pool of "+rec.Template)
	m.pools[poolKey(rec.Template, rec.Network != nil)].recordClaim(time.Since(start))
	m.wakeRefill()
	return rec, nil
}

func (m *Manager) wakeRefill() {
	select {
	case m.refill <- struct{}{}:
	default:
	}
}

// runPools keeps every pool filled until ctx ends.
func (m *Manager) runPools(ctx context.Context) {
	if len(m.pools) == 0 {
		return
	}
	t := time.NewTicker(poolRefillBackoff)
	defer t.Stop()
	for {
		for _, p := range m.pools {
			m.fillPool(ctx, p)
		}
		select {
		case <-ctx.Done():
			return
		case <-m.refill:
			// Let the sandbox just claimed run its first commands before
			// a refill competes with it for the CPU.
			select {
			case <-ctx.Done():
				return
			case <-time.After(poolRefillDelay):
			}
		case <-t.C:
		}
	}
}

// fillPool starts sandboxes until the pool has Min ready (or the server's
// sandbox limit is reached).
func (m *Manager) fillPool(ctx context.Context, p *pool) {
	for ctx.Err() == nil {
		p.mu.Lock()
		need := p.cfg.Min - len(p.ready)
		room := p.cfg.Max - len(p.ready)
		p.mu.Unlock()
		if need <= 0 || room <= 0 {
			return
		}
		n, err := m.store.CountSandboxes(ctx, liveStates...)
		if err != nil || n+m.pooled() >= m.cfg.MaxSandboxes {
			return
		}
		id := ids.New(20)
		limits := m.limitsFor(m.cfg.DefaultLimits)
		spec := sandbox.Spec{ID: id, Template: p.cfg.Template, Limits: limits, Group: id}
		if p.cfg.Network {
			spec.Network = &network.Policy{}
		}
		sb, err := m.host.Create(ctx, spec)
		p.mu.Lock()
		if err != nil {
			p.lastErr = err.Error()
			p.mu.Unlock()
			if !errdefs.IsNotFound(err) { // a missing template is expected until it is built
				m.log.Warn("warm pool: start a sandbox", "template", p.cfg.Template, "err", err)
			}
			return
		}
		p.mu.Unlock()
		if err := m.host.Warm(ctx, sb); err != nil {
			m.log.Debug("warm pool: first command", "sandbox", sb.ID, "err", err)
		}
		p.mu.Lock()
		p.lastErr = ""
		p.ready = append(p.ready, sb)
		p.mu.Unlock()
	}
}

func (m *Manager) pooled() int {
	n := 0
	for _, p := range m.pools {
		p.mu.Lock()
		n += len(p.ready)
		p.mu.Unlock()
	}
	return n
}

// PoolStats reports every warm pool.
func (m *Manager) PoolStats() []PoolStats {
	var out []PoolStats
	for _, p := range m.pools {
		p.mu.Lock()
		st := PoolStats{Template: p.cfg.Template, Network: p.cfg.Network, Min: p.cfg.Min, Max: p.cfg.Max, Ready: len(p.ready),
			Hits: p.hits, Misses: p.misses, LastFailure: p.lastErr}
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
