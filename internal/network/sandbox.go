package network

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
)

// linkUpTimeout bounds the wait for a new link to be usable.
const linkUpTimeout = 3 * time.Second

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

func (m *Manager) nsPath(id string) string { return filepath.Join(m.netnsDir, id) }

func (m *Manager) attachment(sb *sandbox) *Attachment {
	return &Attachment{NetNSPath: sb.nsPath, Interface: SandboxInterface, Address: sb.addr, Gateway: m.gateway, HostVeth: sb.veth}
}

// Setup gives sandbox id a network namespace on the bridge with policy in
// force, and returns where it is. The namespace exists before the sandbox's
// processes do: the runtime joins it.
//
// After a daemon restart, Setup of a sandbox that is still set up in the
// kernel adopts it (same namespace, same address) and re-applies policy
// without cutting anything; addresses the resolver had opened stay open
// until their timeouts. Setup of a sandbox this manager already holds is an
// ErrAlreadyExists: use Update.
func (m *Manager) Setup(ctx context.Context, id string, policy Policy) (*Attachment, error) {
	if err := ids.Validate("sandbox id", id); err != nil {
		return nil, err
	}
	pol, err := compile(policy)
	if err != nil {
		return nil, err
	}
	m.opMu.Lock()
	defer m.opMu.Unlock()
	if m.closed {
		return nil, errClosed
	}
	m.mu.RLock()
	_, known := m.sandboxes[id]
	m.mu.RUnlock()
	if known {
		return nil, fmt.Errorf("network of sandbox %s: %w", id, errdefs.ErrAlreadyExists)
	}
	if sb, ok := m.adoptable(id); ok {
		return m.adopt(sb, policy, pol)
	}
	// Leftovers of a half-made or half-removed network: start clean.
	if m.hasLeftovers(id) {
		if err := m.teardownAndForget(id); err != nil {
			return nil, err
		}
	}
	return m.create(id, policy, pol)
}

func (m *Manager) create(id string, policy Policy, pol *compiled) (_ *Attachment, err error) {
	sb := &sandbox{id: id, veth: vethName(id), nsPath: m.nsPath(id), policy: policy, pol: pol, names: map[netip.Addr]nameEntry{}, mayHaveFlows: pol.opensAnything()}
	var undo []func()
	defer func() {
		if err != nil {
			for _, f := range slices.Backward(undo) {
				f()
			}
		}
	}()
	m.mu.Lock()
	sb.addr, err = m.allocate(id)
	m.mu.Unlock()
	if err != nil {
		return nil, err
	}
	undo = append(undo, func() { m.mu.Lock(); delete(m.used, sb.addr); m.mu.Unlock() })

	// The namespace is configured from a netlink socket opened inside it
	// while the creating thread is still there: no second setns.
	var inner *netlink.Handle
	nsh, err := createNetNS(sb.nsPath, func() error {
		// Interfaces made in this namespace from now on (eth0) get no
		// IPv6; loopback keeps ::1.
		if err := writeSysctl("net/ipv6/conf/default/disable_ipv6", "1"); err != nil {
			return fmt.Errorf("disable IPv6: %w", err)
		}
		h, err := netlink.NewHandle()
		inner = h
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("network of sandbox %s: %w", id, err)
	}
	defer nsh.Close()
	defer inner.Close()
	undo = append(undo, func() { _ = removeNetNSMount(sb.nsPath) })

	if err := m.createVeth(id, sb.veth, sb.addr, int(nsh)); err != nil {
		return nil, fmt.Errorf("network of sandbox %s: %w", id, err)
	}
	undo = append(undo, func() {
		if l, err := m.nl.LinkByName(sb.veth); err == nil {
			_ = m.nl.LinkDel(l)
		}
	})
	if err := m.configureSandboxSide(inner, sb.addr); err != nil {
		return nil, fmt.Errorf("network of sandbox %s: %w", id, err)
	}
	if err := errors.Join(waitOperUp(m.nl, sb.veth, linkUpTimeout), waitOperUp(inner, SandboxInterface, linkUpTimeout)); err != nil {
		return nil, fmt.Errorf("network of sandbox %s: %w", id, err)
	}
	if err := waitOperUp(m.nl, m.opts.Bridge, linkUpTimeout); err != nil {
		// Not fatal: the bridge's queue starts at the latest when the
		// kernel's link watch runs; the first packets may be retried.
		m.log.Warn("network: bridge not up yet", "bridge", m.opts.Bridge, "err", err)
	}

	m.nftMu.Lock()
	err = m.nft.applySandbox(id, sb.addr, pol, nil, false)
	m.nftMu.Unlock()
	if err != nil {
		// The transaction is atomic: nothing of it to undo.
		return nil, err
	}
	m.register(sb)
	m.log.Debug("network: sandbox set up", "sandbox", id, "address", sb.addr, "veth", sb.veth)
	return m.attachment(sb), nil
}

func (m *Manager) register(sb *sandbox) {
	m.mu.Lock()
	m.sandboxes[sb.id] = sb
	m.byAddr[sb.addr] = sb
	m.used[sb.addr] = sb.id
	m.mu.Unlock()
}

// adoptable finds a sandbox an earlier run set up completely: its veth
// (whose alias gives the address) and its namespace mount.
func (m *Manager) adoptable(id string) (*sandbox, bool) {
	name := vethName(id)
	l, err := m.nl.LinkByName(name)
	if err != nil {
		return nil, false
	}
	aid, addr, ok := parseAlias(l.Attrs().Alias)
	if !ok || aid != id {
		return nil, false
	}
	path := m.nsPath(id)
	h, err := netns.GetFromPath(path)
	if err != nil {
		return nil, false
	}
	h.Close()
	// Whatever an earlier policy let it open may still be open.
	return &sandbox{id: id, addr: addr, veth: name, nsPath: path, names: map[netip.Addr]nameEntry{}, mayHaveFlows: true}, true
}

// hasLeftovers reports whether anything of a sandbox that cannot be adopted
// is there: a veth, a namespace mount point, an address held for it. (Its
// nftables objects, if any, are overwritten by the transaction that makes
// the new ones.)
func (m *Manager) hasLeftovers(id string) bool {
	if _, err := m.nl.LinkByName(vethName(id)); err == nil {
		return true
	}
	if _, err := os.Lstat(m.nsPath(id)); err == nil {
		return true
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	for _, owner := range m.used {
		if owner == id {
			return true
		}
	}
	return false
}

func (m *Manager) adopt(sb *sandbox, policy Policy, pol *compiled) (*Attachment, error) {
	sb.policy, sb.pol = policy, pol
	m.nftMu.Lock()
	err := m.nft.applySandbox(sb.id, sb.addr, pol, nil, true)
	var open []dnsElem
	if err == nil {
		open, err = m.nft.listDNS(sb.id)
	}
	m.nftMu.Unlock()
	if err != nil {
		return nil, err
	}
	// The addresses the resolver opened before the restart stay open; which
	// names they were for is not known any more (see Update).
	now := time.Now()
	for _, e := range open {
		sb.names[e.addr] = nameEntry{expires: now.Add(e.timeout), opened: true}
	}
	m.register(sb)
	m.log.Info("network: adopted sandbox from an earlier run", "sandbox", sb.id, "address", sb.addr)
	return m.attachment(sb), nil
}

// Update replaces a sandbox's policy: one nftables transaction, then every
// existing connection the new policy denies is cut (its conntrack entry
// deleted, so its next packet is judged afresh and reset, and its socket in
// the sandbox destroyed, so the program sees the cut at once).
func (m *Manager) Update(ctx context.Context, id string, policy Policy) error {
	pol, err := compile(policy)
	if err != nil {
		return err
	}
	m.opMu.Lock()
	defer m.opMu.Unlock()
	if m.closed {
		return errClosed
	}
	m.nftMu.Lock()
	m.mu.Lock()
	sb := m.sandboxes[id]
	if sb == nil {
		m.mu.Unlock()
		m.nftMu.Unlock()
		return fmt.Errorf("network of sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	// Keep the resolved addresses of names the new policy still allows by
	// name; forget the rest (a default-allowed name's addresses were never
	// opened and need not be).
	now := time.Now()
	var keep []dnsElem
	names := make(map[netip.Addr]nameEntry, len(sb.names))
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
			names[a] = e
			keep = append(keep, dnsElem{addr: a, timeout: e.expires.Sub(now)})
		default:
			e.opened = false
			names[a] = e
		}
	}
	addr, nsPath, mayHaveFlows := sb.addr, sb.nsPath, sb.mayHaveFlows
	m.mu.Unlock()
	err = m.nft.applySandbox(id, addr, pol, keep, false)
	if err == nil {
		m.mu.Lock()
		sb.policy, sb.pol, sb.names = policy, pol, names
		sb.mayHaveFlows = true
		m.mu.Unlock()
	}
	m.nftMu.Unlock()
	if err != nil {
		return err
	}
	if mayHaveFlows {
		if err := m.cut(ctx, addr, nsPath); err != nil {
			return err
		}
	}
	// What is left open is what the new policy allows.
	m.mu.Lock()
	sb.mayHaveFlows = pol.opensAnything() || len(keep) > 0
	m.mu.Unlock()
	return nil
}

// Policy returns the policy in force for a sandbox.
func (m *Manager) Policy(id string) (Policy, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	sb := m.sandboxes[id]
	if sb == nil {
		return Policy{}, fmt.Errorf("network of sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	return sb.policy, nil
}

// Events returns up to limit audit events of a sandbox with a sequence
// number above after, oldest first. Events live in memory (bounded per
// sandbox) until Teardown; a caller that must keep them longer persists
// them through Options.OnEvent or by paging here.
func (m *Manager) Events(id string, after uint64, limit int) []Event {
	if limit <= 0 {
		limit = 100
	}
	return m.events.list(id, after, limit)
}

// policyOf returns the sandbox holding addr and its compiled policy, for the
// resolver.
func (m *Manager) policyOf(addr netip.Addr) (string, *compiled) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	sb := m.byAddr[addr]
	if sb == nil {
		return "", nil
	}
	return sb.id, sb.pol
}

// noteResolved records the addresses the resolver answered for name and,
// when an AllowOut pattern allowed it, opens them. The policy is
// checked again under the locks Update takes, so an answer that raced a
// policy change cannot open what the new policy closed.
func (m *Manager) noteResolved(id, name string, es []dnsElem) error {
	m.nftMu.Lock()
	defer m.nftMu.Unlock()
	m.mu.Lock()
	sb := m.sandboxes[id]
	if sb == nil {
		m.mu.Unlock()
		return fmt.Errorf("sandbox %s is gone: %w", id, errdefs.ErrNotFound)
	}
	allowed, reason := sb.pol.nameVerdict(name)
	if !allowed {
		m.mu.Unlock()
		return fmt.Errorf("the policy changed while %s was resolved: %w", name, errdefs.ErrConflict)
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
			m.mu.Unlock()
			return fmt.Errorf("sandbox %s has %d resolved addresses open, the most allowed: %w", id, maxNamesPerSandbox, errdefs.ErrResourceExhausted)
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
	m.mu.Unlock()
	if len(add) == 0 {
		return nil
	}
	return m.nft.addDNS(id, add)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// attribute names the sandbox an audit record's source belongs to, and the
// name the resolver last answered with the destination, if any.
func (m *Manager) attribute(src, dst netip.Addr) (id, domain string) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	sb := m.byAddr[src]
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
func (m *Manager) allows(sb *sandbox, dst netip.Addr, now time.Time) bool {
	if !dst.Is4() || m.reserved.contains(dst) || sb.pol.deny.contains(dst) {
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
