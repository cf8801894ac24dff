package network

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"

	"github.com/warrenhq/warren/internal/ids"
)

// Teardown removes a sandbox's network: rules, veth, conntrack entries,
// namespace mount and audit events. Removing what is already gone is not an
// error, and it works for sandboxes of an earlier run not adopted yet.
func (m *Manager) Teardown(ctx context.Context, id string) error {
	if err := ids.Validate("sandbox id", id); err != nil {
		return err
	}
	m.opMu.Lock()
	defer m.opMu.Unlock()
	if m.closed {
		return errClosed
	}
	return m.teardownAndForget(id)
}

func (m *Manager) teardownAndForget(id string) error {
	addrs, err := m.teardownLocked(id, nil)
	if len(addrs) > 0 {
		err = errors.Join(err, m.host.forgetFlows(addrs...))
	}
	if err != nil {
		return fmt.Errorf("network teardown of sandbox %s: %w", id, err)
	}
	return nil
}

// teardownLocked removes everything of sandbox id but its conntrack
// entries: it returns the addresses whose entries the caller must forget
// (one walk of the conntrack table can then serve many sandboxes). objs is
// the table's per-sandbox objects when the caller has listed them, or nil.
func (m *Manager) teardownLocked(id string, objs map[string]*sandboxObjects) ([]netip.Addr, error) {
	sb, mayHaveFlows := m.reg.remove(id)
	var addrs []netip.Addr
	if mayHaveFlows {
		addrs = append(addrs, sb.addr)
	}
	// Addresses other than its own were held for it, or matched for it
	// in the rules, by a run that did not finish setting it up.
	other := func(a netip.Addr) bool { return !slices.Contains(addrs, a) && (sb == nil || a != sb.addr) }
	for _, a := range m.addrs.releaseOwner(id) {
		if other(a) {
			addrs = append(addrs, a)
		}
	}
	matched, err := m.rules.removeSandbox(id, objs)
	for _, a := range matched {
		if other(a) {
			addrs = append(addrs, a)
		}
	}
	err = errors.Join(err, m.host.unplug(id))
	m.events.forget(id)
	return addrs, err
}

// Reconcile removes the network of every sandbox not in keep: veths,
// namespace mounts and nftables objects found in the kernel and the run
// directory, whether this run or an earlier one made them. Kept sandboxes
// an earlier run made wait for Setup to adopt them.
func (m *Manager) Reconcile(ctx context.Context, keep map[string]bool) error {
	m.opMu.Lock()
	defer m.opMu.Unlock()
	if m.closed {
		return errClosed
	}
	return m.reconcileLocked(ctx, keep)
}

func (m *Manager) reconcileLocked(_ context.Context, keep map[string]bool) error {
	found := map[string]bool{}
	var errs []error
	var flows []netip.Addr

	partial, err := m.host.pluggedIDs(found)
	if err != nil {
		return err
	}
	errs = append(errs, partial)
	objs, err := m.rules.list()
	if err != nil {
		errs = append(errs, err)
		objs = nil
	}
	for id := range objs {
		found[id] = true
	}
	for _, id := range m.reg.ids() {
		found[id] = true
	}

	for _, id := range slices.Sorted(maps.Keys(found)) {
		if keep[id] {
			continue
		}
		if ids.Validate("sandbox id", id) != nil {
			// Not a name warren would make (a stray file in the run dir).
			errs = append(errs, removeNetNSMount(m.host.nsPath(id)))
			continue
		}
		m.log.Info("network: removing the network of a sandbox that is gone", "sandbox", id)
		addrs, err := m.teardownLocked(id, objs)
		if err != nil {
			errs = append(errs, fmt.Errorf("network teardown of sandbox %s: %w", id, err))
		}
		flows = append(flows, addrs...)
	}
	if len(flows) > 0 {
		errs = append(errs, m.host.forgetFlows(flows...))
	}
	return errors.Join(errs...)
}
