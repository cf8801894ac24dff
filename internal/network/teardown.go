package network

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
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
		err = errors.Join(err, m.forgetFlows(addrs...))
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
	var errs []error
	m.mu.Lock()
	sb := m.sandboxes[id]
	delete(m.sandboxes, id)
	var addrs []netip.Addr
	if sb != nil {
		delete(m.byAddr, sb.addr)
		if sb.mayHaveFlows {
			addrs = append(addrs, sb.addr)
		}
	}
	for a, owner := range m.used {
		if owner == id {
			delete(m.used, a)
			if sb == nil || a != sb.addr {
				addrs = append(addrs, a)
			}
		}
	}
	m.mu.Unlock()

	m.nftMu.Lock()
	var err error
	if objs == nil {
		objs, err = m.nft.listSandboxes()
	}
	if err == nil && objs[id] != nil {
		err = m.nft.removeSandbox(id, objs[id])
		for _, a := range objs[id].addrs {
			if !slices.Contains(addrs, a) && (sb == nil || a != sb.addr) {
				addrs = append(addrs, a)
			}
		}
	}
	m.nftMu.Unlock()
	errs = append(errs, err)

	if l, err := m.nl.LinkByName(vethName(id)); err == nil {
		if err := m.nl.LinkDel(l); err != nil && !isNotFound(err) {
			errs = append(errs, fmt.Errorf("delete veth %s: %w", l.Attrs().Name, err))
		}
	} else if !isNotFound(err) {
		errs = append(errs, err)
	}
	errs = append(errs, removeNetNSMount(m.nsPath(id)))
	m.events.forget(id)
	return addrs, errors.Join(errs...)
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

	links, err := m.nl.LinkList()
	if err != nil {
		return fmt.Errorf("network: list interfaces: %w", err)
	}
	for _, l := range links {
		name := l.Attrs().Name
		if l.Type() != "veth" || len(name) != len(vethPrefix)+12 || name[:len(vethPrefix)] != vethPrefix {
			continue
		}
		id, _, ok := parseAlias(l.Attrs().Alias)
		if !ok || vethName(id) != name {
			// Ours by name but unreadable: nothing can adopt it.
			if err := m.nl.LinkDel(l); err != nil && !isNotFound(err) {
				errs = append(errs, fmt.Errorf("delete stray veth %s: %w", name, err))
			}
			continue
		}
		found[id] = true
	}
	entries, err := os.ReadDir(m.netnsDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	for _, e := range entries {
		found[e.Name()] = true
	}
	m.nftMu.Lock()
	objs, err := m.nft.listSandboxes()
	m.nftMu.Unlock()
	if err != nil {
		errs = append(errs, err)
		objs = nil
	}
	for id := range objs {
		found[id] = true
	}
	m.mu.RLock()
	for id := range m.sandboxes {
		found[id] = true
	}
	m.mu.RUnlock()

	for _, id := range slices.Sorted(func(yield func(string) bool) {
		for id := range found {
			if !yield(id) {
				return
			}
		}
	}) {
		if keep[id] {
			continue
		}
		if ids.Validate("sandbox id", id) != nil {
			// Not a name warren would make (a stray file in the run dir).
			errs = append(errs, removeNetNSMount(filepath.Join(m.netnsDir, id)))
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
		errs = append(errs, m.forgetFlows(flows...))
	}
	return errors.Join(errs...)
}
