package network

import (
	"net/netip"
	"sync"
)

// ruleset puts sandboxes' policies in force: it owns the nftables
// connection and serializes its transactions, and keeps the registry's
// policy state in step with them. A policy is checked and its rules
// written under one hold of mu, so a resolver answer that races a policy
// change cannot open what the new policy closed. Lock order: mu, then the
// registry's.
type ruleset struct {
	mu  sync.Mutex
	nft *nftRules
	reg *registry
}

// apply writes sandbox id's chain and sets for pol (see
// nftRules.applySandbox).
func (rs *ruleset) apply(id string, addr netip.Addr, pol *compiled) error {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.nft.applySandbox(id, addr, pol, nil, false)
}

// readopt re-applies pol to a sandbox an earlier run set up, keeping its
// dns set, and returns the addresses the resolver had opened in it.
func (rs *ruleset) readopt(id string, addr netip.Addr, pol *compiled) ([]dnsElem, error) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if err := rs.nft.applySandbox(id, addr, pol, nil, true); err != nil {
		return nil, err
	}
	return rs.nft.listDNS(id)
}

// update replaces sandbox id's policy in the rules and the registry in one
// transaction, keeping open the resolved addresses pol still allows by name.
func (rs *ruleset) update(id string, policy Policy, pol *compiled) (retarget, error) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rt, err := rs.reg.retarget(id, pol)
	if err != nil {
		return rt, err
	}
	if err := rs.nft.applySandbox(id, rt.sb.addr, pol, rt.keep, false); err != nil {
		return rt, err
	}
	rs.reg.commit(rt, policy, pol)
	return rt, nil
}

// policyOf is the registry's, for the resolver.
func (rs *ruleset) policyOf(addr netip.Addr) (string, *compiled) { return rs.reg.policyOf(addr) }

// noteResolved records the addresses the resolver answered for name and,
// when an AllowOut pattern allowed it, opens them. The policy is checked
// again under mu, which update holds too.
func (rs *ruleset) noteResolved(id, name string, es []dnsElem) error {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	add, err := rs.reg.noteNames(id, name, es)
	if err != nil || len(add) == 0 {
		return err
	}
	return rs.nft.addDNS(id, add)
}

// list returns the per-sandbox objects in the table, by sandbox id.
func (rs *ruleset) list() (map[string]*sandboxObjects, error) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.nft.listSandboxes()
}

// removeSandbox removes sandbox id's objects, found in objs or, when objs
// is nil, in the table, and returns the addresses they matched.
func (rs *ruleset) removeSandbox(id string, objs map[string]*sandboxObjects) ([]netip.Addr, error) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	var err error
	if objs == nil {
		objs, err = rs.nft.listSandboxes()
	}
	if err != nil || objs[id] == nil {
		return nil, err
	}
	return objs[id].addrs, rs.nft.removeSandbox(id, objs[id])
}

// uninstall removes warren's table.
func (rs *ruleset) uninstall() error {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.nft.remove()
}

// close releases the nftables connection; the rules stay in the kernel.
func (rs *ruleset) close() error {
	return rs.nft.conn.CloseLasting()
}
