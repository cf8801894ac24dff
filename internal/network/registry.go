package network

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
)

type sandbox struct {
	id     string
	addr   netip.Addr
	veth   string
	nsPath string
	policy Policy
	pol    *compiled
	// names maps addresses the resolver answered to the name asked; opened
	// says whether the address was added to the dns set (an AllowOut name)
	// or only remembered for the audit (a default-allowed one).
	names map[netip.Addr]nameEntry
	// mayHaveFlows is false while the sandbox cannot have an established
	// connection through the host (its policies so far opened nothing):
	// then an update has nothing to cut and a teardown no conntrack entry
	// to forget, and both skip the walk of the conntrack table (a walk of
	// every bucket of the host-wide table, ~9 ms here whatever it holds).
	mayHaveFlows bool
}

type nameEntry struct {
	name    string
	expires time.Time
	opened  bool
}

// registry holds the sandboxes a Manager has set up, by id and by address,
// and the policy state of each: what the policy is, which names the
// resolver answered, whether it may have connections open. Its fields
// are read by the audit and the resolver as well as by the Manager's
// operations; its lock is the last one taken (after Manager.opMu and
// ruleset.mu).
type registry struct {
	mu        sync.RWMutex
	sandboxes map[string]*sandbox
	byAddr    map[netip.Addr]*sandbox
	// reserved are the ranges no policy opens, for allows.
	reserved spans
}

func newRegistry(reserved spans) *registry {
	return &registry{sandboxes: map[string]*sandbox{}, byAddr: map[netip.Addr]*sandbox{}, reserved: reserved}
}

// get returns sandbox id, or nil. Its id, addr, veth and nsPath never
// change; the rest is read under the registry's lock.
func (r *registry) get(id string) *sandbox {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.sandboxes[id]
}

func (r *registry) add(sb *sandbox) {
	r.mu.Lock()
	r.sandboxes[sb.id] = sb
	r.byAddr[sb.addr] = sb
	r.mu.Unlock()
}

// remove forgets sandbox id and returns it (nil if unknown) with whether
// it may have connections open.
func (r *registry) remove(id string) (*sandbox, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sb := r.sandboxes[id]
	delete(r.sandboxes, id)
	if sb == nil {
		return nil, false
	}
	delete(r.byAddr, sb.addr)
	return sb, sb.mayHaveFlows
}

func (r *registry) ids() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Collect(maps.Keys(r.sandboxes))
}

// policy returns the policy in force for sandbox id.
func (r *registry) policy(id string) (Policy, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	sb := r.sandboxes[id]
	if sb == nil {
		return Policy{}, fmt.Errorf("network of sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	return sb.policy, nil
}

// policyOf returns the sandbox holding addr and its compiled policy, for the
// resolver.
func (r *registry) policyOf(addr netip.Addr) (string, *compiled) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	sb := r.byAddr[addr]
	if sb == nil {
		return "", nil
	}
	return sb.id, sb.pol
}

// attribute names the sandbox an audit record's source belongs to, and the
// name the resolver last answered with the destination, if any.
func (r *registry) attribute(src, dst netip.Addr) (id, domain string) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	sb := r.byAddr[src]
	if sb == nil {
		return "", ""
	}
	if e, ok := sb.names[dst]; ok {
		domain = e.name
	}
	return sb.id, domain
}

// allows is the ruleset's decision for a new connection from sb to dst,
// computed in Go (mu held): it picks the connections an update cuts.
func (r *registry) allows(sb *sandbox, dst netip.Addr, now time.Time) bool {
	if !dst.Is4() || r.reserved.contains(dst) || sb.pol.deny.contains(dst) {
		return false
	}
	if sb.pol.allow.contains(dst) {
		return true
	}
	if e, ok := sb.names[dst]; ok && e.opened && e.expires.After(now) {
		return true
	}
	return sb.pol.defaultAllow
}

// denier returns what the policy now in force denies to the sandbox at
// addr, as of now, for a cut.
func (r *registry) denier(addr netip.Addr) func(dst netip.Addr) bool {
	now := time.Now()
	return func(dst netip.Addr) bool {
		r.mu.RLock()
		defer r.mu.RUnlock()
		sb := r.byAddr[addr]
		return sb != nil && !r.allows(sb, dst, now)
	}
}

// retarget is what a new policy does to a sandbox's resolved names: the
// entries it keeps, the dns set elements those keep open, and whether the
// sandbox may have had connections open before it.
type retarget struct {
	sb           *sandbox
	keep         []dnsElem
	names        map[netip.Addr]nameEntry
	mayHaveFlows bool
}

// retarget keeps the resolved addresses of names the new policy pol still
// allows by name and forgets the rest (a default-allowed name's addresses
// were never opened and need not be). It changes nothing: commit does.
func (r *registry) retarget(id string, pol *compiled) (retarget, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sb := r.sandboxes[id]
	if sb == nil {
		return retarget{}, fmt.Errorf("network of sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	now := time.Now()
	rt := retarget{sb: sb, names: make(map[netip.Addr]nameEntry, len(sb.names)), mayHaveFlows: sb.mayHaveFlows}
	sameNames := slices.Equal(sb.pol.allowNames, pol.allowNames) && slices.Equal(sb.pol.denyNames, pol.denyNames)
	for a, e := range sb.names {
		allowed, reason := pol.nameVerdict(e.name)
		if e.name == "" {
			// Opened before a restart for a name no longer known: kept
			// while the policy's names are unchanged.
			allowed, reason = sameNames, ReasonDomain
		}
		switch {
		case !e.expires.After(now) || !allowed:
		case reason == ReasonDomain:
			e.opened = true
			rt.names[a] = e
			rt.keep = append(rt.keep, dnsElem{addr: a, timeout: e.expires.Sub(now)})
		default:
			e.opened = false
			rt.names[a] = e
		}
	}
	return rt, nil
}

// commit puts policy in force for rt's sandbox once the rules hold it.
func (r *registry) commit(rt retarget, policy Policy, pol *compiled) {
	r.mu.Lock()
	rt.sb.policy, rt.sb.pol, rt.sb.names = policy, pol, rt.names
	rt.sb.mayHaveFlows = true
	r.mu.Unlock()
}

// settle records whether sb may have connections open, once a cut has
// left only what its policy allows.
func (r *registry) settle(sb *sandbox, mayHaveFlows bool) {
	r.mu.Lock()
	sb.mayHaveFlows = mayHaveFlows
	r.mu.Unlock()
}

// noteNames records the addresses the resolver answered for name and
// returns those to open: all of them when an AllowOut pattern allowed the
// name, none for a default-allowed one.
func (r *registry) noteNames(id, name string, es []dnsElem) ([]dnsElem, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sb := r.sandboxes[id]
	if sb == nil {
		return nil, fmt.Errorf("sandbox %s is gone: %w", id, errdefs.ErrNotFound)
	}
	allowed, reason := sb.pol.nameVerdict(name)
	if !allowed {
		return nil, fmt.Errorf("the policy changed while %s was resolved: %w", name, errdefs.ErrConflict)
	}
	open := reason == ReasonDomain
	now := time.Now()
	if len(sb.names)+len(es) > maxNamesPerSandbox {
		for a, e := range sb.names {
			if !e.expires.After(now) {
				delete(sb.names, a)
			}
		}
	}
	var add []dnsElem
	for _, e := range es {
		if _, ok := sb.names[e.addr]; !ok && len(sb.names) >= maxNamesPerSandbox {
			return nil, fmt.Errorf("sandbox %s has %d resolved addresses open, the most allowed: %w", id, maxNamesPerSandbox, errdefs.ErrResourceExhausted)
		}
		exp := now.Add(e.timeout)
		opened := open
		if prev, ok := sb.names[e.addr]; ok && prev.opened && prev.expires.After(now) {
			// Already open (for this name or another): a shorter TTL
			// does not shorten it, a default-allowed name does not
			// close it.
			opened = true
			exp = later(exp, prev.expires)
		}
		sb.names[e.addr] = nameEntry{name: name, expires: exp, opened: opened}
		if open {
			add = append(add, dnsElem{addr: e.addr, timeout: exp.Sub(now)})
		}
	}
	if len(add) > 0 {
		sb.mayHaveFlows = true
	}
	return add, nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
