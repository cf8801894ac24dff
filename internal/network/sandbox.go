package network

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
)

func (m *Manager) attachment(sb *sandbox) *Attachment {
	return &Attachment{NetNSPath: sb.nsPath, Interface: SandboxInterface, Address: sb.addr, Gateway: m.host.gateway, HostVeth: sb.veth}
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
	if m.reg.get(id) != nil {
		return nil, fmt.Errorf("network of sandbox %s: %w", id, errdefs.ErrAlreadyExists)
	}
	if sb, ok := m.host.plugged(id); ok {
		return m.adopt(sb, policy, pol)
	}
	// Leftovers of a half-made or half-removed network: start clean.
	if m.host.hasLeftovers(id) || m.addrs.holds(id) {
		if err := m.teardownAndForget(id); err != nil {
			return nil, err
		}
	}
	return m.create(id, policy, pol)
}

func (m *Manager) create(id string, policy Policy, pol *compiled) (_ *Attachment, err error) {
	sb := &sandbox{id: id, veth: m.host.vethName(id), nsPath: m.host.nsPath(id), policy: policy, pol: pol, names: map[netip.Addr]nameEntry{}, mayHaveFlows: pol.opensAnything()}
	if sb.addr, err = m.addrs.allocate(id); err != nil {
		return nil, err
	}
	unplug, err := m.host.plug(sb)
	if err != nil {
		m.addrs.release(sb.addr)
		return nil, fmt.Errorf("network of sandbox %s: %w", id, err)
	}
	if err := m.rules.apply(id, sb.addr, pol); err != nil {
		// The transaction is atomic: nothing of it to undo, only the
		// namespace and the address.
		unplug()
		m.addrs.release(sb.addr)
		return nil, err
	}
	m.register(sb)
	m.log.Debug("network: sandbox set up", "sandbox", id, "address", sb.addr, "veth", sb.veth)
	return m.attachment(sb), nil
}

func (m *Manager) register(sb *sandbox) {
	m.reg.add(sb)
	m.addrs.hold(sb.addr, sb.id)
}

func (m *Manager) adopt(sb *sandbox, policy Policy, pol *compiled) (*Attachment, error) {
	sb.policy, sb.pol = policy, pol
	open, err := m.rules.readopt(sb.id, sb.addr, pol)
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
	rt, err := m.rules.update(id, policy, pol)
	if err != nil {
		return err
	}
	if rt.mayHaveFlows {
		if err := m.host.cut(ctx, rt.sb.addr, rt.sb.nsPath, m.reg.denier(rt.sb.addr)); err != nil {
			return err
		}
	}
	// What is left open is what the new policy allows.
	m.reg.settle(rt.sb, pol.opensAnything() || len(rt.keep) > 0)
	return nil
}

// Policy returns the policy in force for a sandbox.
func (m *Manager) Policy(id string) (Policy, error) { return m.reg.policy(id) }

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

// Attachment returns where a sandbox this manager holds is on the network,
// for a runtime that restarts its processes (a rollback) in the same
// namespace.
func (m *Manager) Attachment(id string) (*Attachment, error) {
	sb := m.reg.get(id)
	if sb == nil {
		return nil, fmt.Errorf("network of sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	return m.attachment(sb), nil
}

// Readdress puts a sandbox's address and routes back on its eth0 when
// runsc took them (see hostNet.readdress).
func (m *Manager) Readdress(id string) error {
	sb := m.reg.get(id)
	if sb == nil {
		return fmt.Errorf("network of sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	return m.host.readdress(id, sb.addr, sb.nsPath)
}
