package network

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// The ruleset, all in one table warren owns (`inet warren`, or
// Options.Table):
//
//	chain forward  (filter, hook forward)   iifname <bridge> jump egress
//	                                        oifname <bridge> ct state established,related accept
//	                                        oifname <bridge> drop
//	                                        iifname <uplink> ct state not established,related drop   (only if warren enabled the uplink's forwarding)
//	chain input    (filter, hook input)     iifname <bridge> jump to_host
//	chain postrouting (nat, srcnat)         ip saddr <subnet> oifname != <bridge> masquerade
//	chain egress   ct state established,related accept; invalid → deny
//	               not IPv4 → log, deny; ip daddr @reserved → log, deny
//	               ip saddr vmap @sandboxes  (address → jump sb_<id>)
//	               anything else (an address no sandbox has) → log, deny
//	chain sb_<id>  ip daddr @sb_<id>_deny  → log, deny
//	               ip daddr @sb_<id>_allow → log, accept
//	               ip daddr @sb_<id>_dns   → log, accept (resolver-filled, with timeouts)
//	               default → log, accept | log, deny
//	chain to_host  established → accept; DNS to the gateway → accept; else log, deny
//	chain deny     tcp → reject with tcp reset; else reject with icmpx admin-prohibited
//	chain proxy    (nat, hook prerouting; only with an egress proxy port)
//	               iifname <bridge> ip saddr @proxied tcp dport {80, 443} redirect to :<proxy port>
//	               (to_host then accepts TCP to the gateway's proxy port; the proxy checks the
//	               sandbox's policy itself, since redirected connections never reach forward)
//
// Every log statement sends the packet's headers to an NFLOG group with a
// prefix naming the verdict and the reason (see audit.go). Only packets that
// open a connection reach them: established traffic is accepted first.
// Denied connections are rejected rather than dropped so that a program in
// the sandbox fails at once instead of waiting for a timeout, and so that an
// established connection cut by an update is reset on its next packet.
const (
	chForward    = "forward"
	chInput      = "input"
	chPost       = "postrouting"
	chEgress     = "egress"
	chToHost     = "to_host"
	chDeny       = "deny"
	setReserved  = "reserved"
	chProxy      = "proxy"
	setProxied   = "proxied"
	setTunnelled = "tunnelled"
	mapSandboxes = "sandboxes"
	sbPrefix     = "sb_"
	logPrefix    = "warren:"
)

func sbChain(id string) string    { return sbPrefix + id }
func sbAllowSet(id string) string { return sbPrefix + id + "_allow" }
func sbDenySet(id string) string  { return sbPrefix + id + "_deny" }
func sbDNSSet(id string) string   { return sbPrefix + id + "_dns" }

// Reasons carried in log prefixes and events.
const (
	ReasonReserved = "reserved" // an always-denied range
	ReasonPolicy   = "policy"   // an AllowOut/DenyOut address or CIDR (for dns events: a DenyOut name)
	ReasonDomain   = "domain"   // an address the resolver answered for an allowed name
	ReasonDefault  = "default"  // nothing matched: the policy's default
	ReasonHost     = "host"     // the host itself (other than its resolver)
	ReasonIPv6     = "ipv6"     // sandboxes have IPv4 only
	ReasonUnknown  = "unknown"  // a source address no sandbox has
)

type nftRules struct {
	conn     *nftables.Conn
	table    *nftables.Table
	group    uint16
	bridge   string
	gateway  netip.Addr
	subnet   netip.Prefix
	reserved spans
	uplink   string
	// guardUplink: warren turned forwarding on for the uplink, so the only
	// forwarding from it that should happen is replies toward the bridge;
	// without the guard, turning it on would also let the uplink's
	// neighbours route through the host to its other networks.
	guardUplink bool
	// proxyPort is the egress proxy's port on the gateway (0: no proxy).
	proxyPort uint16
}

func (r *nftRules) proxiedSet() *nftables.Set {
	return &nftables.Set{Table: r.table, Name: setProxied, KeyType: nftables.TypeIPAddr}
}

func (r *nftRules) tunnelledSet() *nftables.Set {
	return &nftables.Set{Table: r.table, Name: setTunnelled, KeyType: nftables.TypeIPAddr}
}

// installSets writes the shared sets: the always-denied ranges (rewritten)
// and the sandboxes map (kept: it confines running sandboxes).
func (r *nftRules) installSets(exists bool) (reserved, sandboxes *nftables.Set, _ error) {
	c := r.conn
	reserved = r.reservedSet()
	if err := c.AddSet(reserved, nil); err != nil {
		return nil, nil, err
	}
	if exists {
		c.FlushSet(reserved)
	}
	if err := c.SetAddElements(reserved, intervalElements(r.reserved)); err != nil {
		return nil, nil, err
	}
	sandboxes = r.sandboxesMap()
	if err := c.AddSet(sandboxes, nil); err != nil {
		return nil, nil, err
	}
	return reserved, sandboxes, nil
}

type hostPort struct {
	proto byte
	port  uint16
}

// hostPorts are what sandboxes may reach on the gateway: the resolver and,
// when there is one, the egress proxy.
func (r *nftRules) hostPorts() []hostPort {
	ps := []hostPort{{unix.IPPROTO_UDP, 53}, {unix.IPPROTO_TCP, 53}}
	if r.proxyPort != 0 {
		ps = append(ps, hostPort{unix.IPPROTO_TCP, r.proxyPort})
	}
	return ps
}

// installProxy adds the proxy's redirect chain and the set of proxied
// sandboxes (kept across restarts, as the sandboxes map is), when there is
// a proxy.
func (r *nftRules) installProxy(exists bool) error {
	if r.proxyPort == 0 {
		return nil
	}
	c := r.conn
	proxied, tunnelled := r.proxiedSet(), r.tunnelledSet()
	if err := c.AddSet(proxied, nil); err != nil {
		return err
	}
	if err := c.AddSet(tunnelled, nil); err != nil {
		return err
	}
	accept := nftables.ChainPolicyAccept
	ch := c.AddChain(&nftables.Chain{Name: chProxy, Table: r.table, Type: nftables.ChainTypeNAT, Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityNATDest, Policy: &accept})
	if exists {
		c.FlushChain(ch)
	}
	for _, port := range []uint16{80, 443} {
		c.AddRule(&nftables.Rule{Table: r.table, Chain: ch, Exprs: cat(
			ifname(expr.MetaKeyIIFNAME, r.bridge, true), nfproto(unix.NFPROTO_IPV4, true),
			saddr(), lookup(proxied, false), l4proto(unix.IPPROTO_TCP), dport(port),
			&expr.Immediate{Register: 1, Data: binary.BigEndian.AppendUint16(nil, r.proxyPort)},
			&expr.Redir{RegisterProtoMin: 1},
		)})
	}
	// A sandbox with a SOCKS5 upstream: all its TCP.
	c.AddRule(&nftables.Rule{Table: r.table, Chain: ch, Exprs: cat(
		ifname(expr.MetaKeyIIFNAME, r.bridge, true), nfproto(unix.NFPROTO_IPV4, true),
		saddr(), lookup(tunnelled, false), l4proto(unix.IPPROTO_TCP),
		&expr.Immediate{Register: 1, Data: binary.BigEndian.AppendUint16(nil, r.proxyPort)},
		&expr.Redir{RegisterProtoMin: 1},
	)})
	return nil
}

// setProxied puts addr in the proxied and tunnelled sets, or takes it
// out. Adding an element that is there is no error, deleting one that is
// not is: so a removal adds first, in the same transaction.
func (r *nftRules) setProxied(addr netip.Addr, proxied, tunnelled bool) error {
	if r.proxyPort == 0 {
		return nil
	}
	a4 := addr.As4()
	el := []nftables.SetElement{{Key: a4[:]}}
	for _, m := range []struct {
		set *nftables.Set
		on  bool
	}{{r.proxiedSet(), proxied}, {r.tunnelledSet(), tunnelled}} {
		if err := r.conn.SetAddElements(m.set, el); err != nil {
			return err
		}
		if !m.on {
			if err := r.conn.SetDeleteElements(m.set, el); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *nftRules) chain(name string) *nftables.Chain {
	return &nftables.Chain{Name: name, Table: r.table}
}

func (r *nftRules) reservedSet() *nftables.Set {
	return &nftables.Set{Table: r.table, Name: setReserved, KeyType: nftables.TypeIPAddr, Interval: true}
}

func (r *nftRules) sandboxesMap() *nftables.Set {
	return &nftables.Set{Table: r.table, Name: mapSandboxes, KeyType: nftables.TypeIPAddr, IsMap: true, DataType: nftables.TypeVerdict}
}

func (r *nftRules) allowSet(id string) *nftables.Set {
	return &nftables.Set{Table: r.table, Name: sbAllowSet(id), KeyType: nftables.TypeIPAddr, Interval: true}
}

func (r *nftRules) denySet(id string) *nftables.Set {
	return &nftables.Set{Table: r.table, Name: sbDenySet(id), KeyType: nftables.TypeIPAddr, Interval: true}
}

func (r *nftRules) dnsSet(id string) *nftables.Set {
	return &nftables.Set{Table: r.table, Name: sbDNSSet(id), KeyType: nftables.TypeIPAddr, HasTimeout: true}
}

// install writes the table, its base chains and shared sets in one
// transaction. It keeps the sandboxes map and the per-sandbox chains of an
// earlier run (they are what keeps running sandboxes confined across a
// restart) and rewrites everything else, so a changed bridge or subnet takes
// effect without a window with no rules.
func (r *nftRules) install() error {
	c := r.conn
	exists := true
	if _, err := c.ListTableOfFamily(r.table.Name, nftables.TableFamilyINet); err != nil {
		if !errors.Is(err, os.ErrNotExist) && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("look up table inet %s: %w", r.table.Name, err)
		}
		exists = false
	}
	c.AddTable(r.table)
	accept := nftables.ChainPolicyAccept
	base := []*nftables.Chain{
		{Name: chForward, Table: r.table, Type: nftables.ChainTypeFilter, Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter, Policy: &accept},
		{Name: chInput, Table: r.table, Type: nftables.ChainTypeFilter, Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter, Policy: &accept},
		{Name: chPost, Table: r.table, Type: nftables.ChainTypeNAT, Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource, Policy: &accept},
		r.chain(chEgress), r.chain(chToHost), r.chain(chDeny),
	}
	for _, ch := range base {
		c.AddChain(ch)
		if exists {
			c.FlushChain(ch)
		}
	}
	reserved, sandboxes, err := r.installSets(exists)
	if err != nil {
		return err
	}
	if err := r.installProxy(exists); err != nil {
		return err
	}

	add := func(chain string, exprs ...expr.Any) {
		c.AddRule(&nftables.Rule{Table: r.table, Chain: r.chain(chain), Exprs: exprs})
	}
	// deny: reset TCP, refuse the rest with an ICMP error.
	add(chDeny, cat(l4proto(unix.IPPROTO_TCP), &expr.Reject{Type: unix.NFT_REJECT_TCP_RST})...)
	add(chDeny, &expr.Reject{Type: unix.NFT_REJECT_ICMPX_UNREACH, Code: unix.NFT_REJECT_ICMPX_ADMIN_PROHIBITED})

	add(chForward, cat(ifname(expr.MetaKeyIIFNAME, r.bridge, true), jump(chEgress))...)
	add(chForward, cat(ifname(expr.MetaKeyOIFNAME, r.bridge, true), ctState(expr.CtStateBitESTABLISHED|expr.CtStateBitRELATED), verdict(expr.VerdictAccept))...)
	add(chForward, cat(ifname(expr.MetaKeyOIFNAME, r.bridge, true), verdict(expr.VerdictDrop))...)
	if r.guardUplink {
		add(chForward, r.uplinkGuard()...)
	}

	add(chInput, cat(ifname(expr.MetaKeyIIFNAME, r.bridge, true), jump(chToHost))...)

	add(chEgress, cat(ctState(expr.CtStateBitESTABLISHED|expr.CtStateBitRELATED), verdict(expr.VerdictAccept))...)
	add(chEgress, cat(ctState(expr.CtStateBitINVALID), gotoChain(chDeny))...)
	add(chEgress, cat(nfproto(unix.NFPROTO_IPV4, false), r.log("D", ReasonIPv6), gotoChain(chDeny))...)
	add(chEgress, cat(daddr(), lookup(reserved, false), r.log("D", ReasonReserved), gotoChain(chDeny))...)
	add(chEgress, saddr(), &expr.Lookup{SourceRegister: 1, SetName: sandboxes.Name, SetID: sandboxes.ID, IsDestRegSet: true, DestRegister: 0})
	add(chEgress, r.log("D", ReasonUnknown), gotoChain(chDeny))

	add(chToHost, cat(ctState(expr.CtStateBitESTABLISHED|expr.CtStateBitRELATED), verdict(expr.VerdictAccept))...)
	gw := r.gateway.As4()
	for _, p := range r.hostPorts() {
		add(chToHost, cat(nfproto(unix.NFPROTO_IPV4, true), daddr(), eq(gw[:]), l4proto(p.proto), dport(p.port), verdict(expr.VerdictAccept))...)
	}
	// Broadcast and multicast (DHCP, mDNS) are dropped quietly: they are not
	// connections and would flood the audit.
	add(chToHost, &expr.Meta{Key: expr.MetaKeyPKTTYPE, Register: 1}, &expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: []byte{unix.PACKET_HOST}}, verdict(expr.VerdictDrop))
	add(chToHost, r.log("D", ReasonHost), gotoChain(chDeny))

	net4 := r.subnet.Masked().Addr().As4()
	mask := []byte(net.CIDRMask(r.subnet.Bits(), 32))
	add(chPost, cat(nfproto(unix.NFPROTO_IPV4, true), saddr(),
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: mask, Xor: []byte{0, 0, 0, 0}},
		eq(net4[:]), ifname(expr.MetaKeyOIFNAME, r.bridge, false), &expr.Masq{})...)

	return flush(c, "install table inet "+r.table.Name)
}

// applySandbox writes a sandbox's sets, chain and map entry in one
// transaction, replacing whatever the table held for it. dns lists the
// resolver-opened addresses to keep; when keepDNS is set the dns set is
// left as it is (adopting a sandbox after a restart, when the resolver's
// memory of it is gone).
func (r *nftRules) applySandbox(id string, addr netip.Addr, pol *compiled, dns []dnsElem, keepDNS bool) error {
	c := r.conn
	allow, deny, dnsSet := r.allowSet(id), r.denySet(id), r.dnsSet(id)
	for _, s := range []*nftables.Set{allow, deny, dnsSet} {
		if err := c.AddSet(s, nil); err != nil {
			return err
		}
	}
	ch := c.AddChain(r.chain(sbChain(id)))
	// Flushing what this transaction just created is harmless, and makes
	// creating and replacing the same operation.
	c.FlushSet(allow)
	c.FlushSet(deny)
	c.FlushChain(ch)
	if !keepDNS {
		c.FlushSet(dnsSet)
	}
	if err := c.SetAddElements(allow, intervalElements(pol.allow)); err != nil {
		return err
	}
	if err := c.SetAddElements(deny, intervalElements(pol.deny)); err != nil {
		return err
	}
	if !keepDNS && len(dns) > 0 {
		if err := c.SetAddElements(dnsSet, dnsElements(dns)); err != nil {
			return err
		}
	}
	add := func(exprs ...expr.Any) {
		c.AddRule(&nftables.Rule{Table: r.table, Chain: ch, Exprs: exprs})
	}
	add(cat(daddr(), lookup(deny, false), r.log("D", ReasonPolicy), gotoChain(chDeny))...)
	add(cat(daddr(), lookup(allow, false), r.log("A", ReasonPolicy), verdict(expr.VerdictAccept))...)
	add(cat(daddr(), lookup(dnsSet, false), r.log("A", ReasonDomain), verdict(expr.VerdictAccept))...)
	if pol.defaultAllow {
		add(r.log("A", ReasonDefault), verdict(expr.VerdictAccept))
	} else {
		add(r.log("D", ReasonDefault), gotoChain(chDeny))
	}
	if err := r.setProxied(addr, pol.proxied(), pol.tunnelled()); err != nil {
		return err
	}
	a4 := addr.As4()
	if err := c.SetAddElements(r.sandboxesMap(), []nftables.SetElement{{
		Key: a4[:], VerdictData: &expr.Verdict{Kind: expr.VerdictJump, Chain: sbChain(id)},
	}}); err != nil {
		return err
	}
	return flush(c, "apply rules of sandbox "+id)
}

type dnsElem struct {
	addr    netip.Addr
	timeout time.Duration
}

func dnsElements(es []dnsElem) []nftables.SetElement {
	out := make([]nftables.SetElement, 0, len(es))
	for _, e := range es {
		a := e.addr.As4()
		// The kernel's timeouts are in milliseconds; zero would mean the
		// set's default (none), so round up.
		out = append(out, nftables.SetElement{Key: a[:], Timeout: max(e.timeout, time.Second)})
	}
	return out
}

// addDNS opens addresses the resolver answered, refreshing the timeout of
// those already there.
func (r *nftRules) addDNS(id string, es []dnsElem) error {
	if err := r.conn.SetAddElements(r.dnsSet(id), dnsElements(es)); err != nil {
		return err
	}
	return flush(r.conn, "open resolved addresses of sandbox "+id)
}

// listDNS returns the addresses in a sandbox's dns set with the time each
// has left.
func (r *nftRules) listDNS(id string) ([]dnsElem, error) {
	elems, err := r.conn.GetSetElements(r.dnsSet(id))
	if err != nil {
		return nil, fmt.Errorf("nftables: list resolved addresses of sandbox %s: %w", id, err)
	}
	var out []dnsElem
	for _, e := range elems {
		if len(e.Key) == 4 && e.Expires > 0 {
			out = append(out, dnsElem{addr: netip.AddrFrom4([4]byte(e.Key)), timeout: e.Expires})
		}
	}
	return out, nil
}

// sandboxObjects is what the table holds for one sandbox.
type sandboxObjects struct {
	chain bool
	sets  []string
	addrs []netip.Addr // keys of the sandboxes map that jump to its chain
}

// listSandboxes returns the per-sandbox objects in the table, by sandbox id.
func (r *nftRules) listSandboxes() (map[string]*sandboxObjects, error) {
	out := map[string]*sandboxObjects{}
	get := func(id string) *sandboxObjects {
		o := out[id]
		if o == nil {
			o = &sandboxObjects{}
			out[id] = o
		}
		return o
	}
	chains, err := r.conn.ListChainsOfTableFamily(nftables.TableFamilyINet)
	if err != nil {
		return nil, fmt.Errorf("list chains: %w", err)
	}
	for _, ch := range chains {
		if ch.Table.Name == r.table.Name && strings.HasPrefix(ch.Name, sbPrefix) {
			get(strings.TrimPrefix(ch.Name, sbPrefix)).chain = true
		}
	}
	sets, err := r.conn.GetSets(r.table)
	if err != nil {
		return nil, fmt.Errorf("list sets: %w", err)
	}
	for _, s := range sets {
		if !strings.HasPrefix(s.Name, sbPrefix) {
			continue
		}
		rest := strings.TrimPrefix(s.Name, sbPrefix)
		for _, suf := range []string{"_allow", "_deny", "_dns"} {
			if id, ok := strings.CutSuffix(rest, suf); ok {
				o := get(id)
				o.sets = append(o.sets, s.Name)
			}
		}
	}
	elems, err := r.conn.GetSetElements(r.sandboxesMap())
	if err != nil {
		return nil, fmt.Errorf("list sandboxes map: %w", err)
	}
	for _, e := range elems {
		chain := verdictChain(e.Val)
		if len(e.Key) != 4 || !strings.HasPrefix(chain, sbPrefix) {
			continue
		}
		o := get(strings.TrimPrefix(chain, sbPrefix))
		o.addrs = append(o.addrs, netip.AddrFrom4([4]byte(e.Key)))
	}
	return out, nil
}

// removeSandbox deletes what listSandboxes found for id, in one transaction.
func (r *nftRules) removeSandbox(id string, o *sandboxObjects) error {
	c := r.conn
	if len(o.addrs) > 0 {
		var keys []nftables.SetElement
		for _, a := range o.addrs {
			a4 := a.As4()
			keys = append(keys, nftables.SetElement{Key: a4[:]})
		}
		if err := c.SetDeleteElements(r.sandboxesMap(), keys); err != nil {
			return err
		}
		for _, a := range o.addrs {
			if err := r.setProxied(a, false, false); err != nil {
				return err
			}
		}
	}
	if o.chain {
		ch := r.chain(sbChain(id))
		c.FlushChain(ch)
		c.DelChain(ch)
	}
	for _, s := range o.sets {
		c.DelSet(&nftables.Set{Table: r.table, Name: s})
	}
	return flush(c, "remove rules of sandbox "+id)
}

// remove deletes the whole table.
func (r *nftRules) remove() error {
	if _, err := r.conn.ListTableOfFamily(r.table.Name, nftables.TableFamilyINet); err != nil {
		return nil // already gone
	}
	r.conn.DelTable(r.table)
	return flush(r.conn, "delete table inet "+r.table.Name)
}

// verdictChain reads the chain name out of a verdict map element's data
// (NFTA_DATA_VERDICT: NFTA_VERDICT_CODE, NFTA_VERDICT_CHAIN).
func verdictChain(b []byte) string {
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return ""
	}
	for ad.Next() {
		if ad.Type() == unix.NFTA_VERDICT_CHAIN {
			return strings.TrimRight(ad.String(), "\x00")
		}
	}
	return ""
}

func flush(c *nftables.Conn, what string) error {
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nftables: %s: %w", what, err)
	}
	return nil
}

// intervalElements turns spans into interval-set elements: a start key and
// an end key one past the last address, flagged as an interval end (omitted
// when the span runs to the top of the address space).
func intervalElements(s spans) []nftables.SetElement {
	out := make([]nftables.SetElement, 0, 2*len(s))
	for _, r := range s {
		lo := addrOf(r.lo).As4()
		out = append(out, nftables.SetElement{Key: lo[:]})
		if r.hi != ^uint32(0) {
			hi := addrOf(r.hi + 1).As4()
			out = append(out, nftables.SetElement{Key: hi[:], IntervalEnd: true})
		}
	}
	return out
}

// Expression helpers. Everything matches through register 1.

func cat(parts ...any) []expr.Any {
	var out []expr.Any
	for _, p := range parts {
		switch v := p.(type) {
		case expr.Any:
			out = append(out, v)
		case []expr.Any:
			out = append(out, v...)
		}
	}
	return out
}

func eq(data []byte) expr.Any {
	return &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: data}
}

func ifname(key expr.MetaKey, name string, equal bool) []expr.Any {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, name)
	op := expr.CmpOpEq
	if !equal {
		op = expr.CmpOpNeq
	}
	return []expr.Any{&expr.Meta{Key: key, Register: 1}, &expr.Cmp{Op: op, Register: 1, Data: b}}
}

func nfproto(proto byte, equal bool) []expr.Any {
	op := expr.CmpOpEq
	if !equal {
		op = expr.CmpOpNeq
	}
	return []expr.Any{&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1}, &expr.Cmp{Op: op, Register: 1, Data: []byte{proto}}}
}

func l4proto(proto byte) []expr.Any {
	return []expr.Any{&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}, eq([]byte{proto})}
}

func dport(port uint16) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		eq(binary.BigEndian.AppendUint16(nil, port)),
	}
}

func saddr() expr.Any {
	return &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4}
}

func daddr() expr.Any {
	return &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4}
}

func lookup(s *nftables.Set, invert bool) expr.Any {
	return &expr.Lookup{SourceRegister: 1, SetName: s.Name, SetID: s.ID, Invert: invert}
}

func ctState(bits uint32) []expr.Any {
	return []expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binary.NativeEndian.AppendUint32(nil, bits), Xor: []byte{0, 0, 0, 0}},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: []byte{0, 0, 0, 0}},
	}
}

// uplinkGuard drops what the uplink would have the host forward, but only
// what opens a connection: replies coming in on the uplink toward another
// daemon's bridge on this host (which this table knows nothing of) must
// pass; nothing else forwarded from the uplink is established, since
// nothing from it is let through new.
func (r *nftRules) uplinkGuard() []expr.Any {
	return cat(ifname(expr.MetaKeyIIFNAME, r.uplink, true), ctStateNone(expr.CtStateBitESTABLISHED|expr.CtStateBitRELATED), verdict(expr.VerdictDrop))
}

// ctStateNone matches a packet whose conntrack state has none of bits.
func ctStateNone(bits uint32) []expr.Any {
	return []expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binary.NativeEndian.AppendUint32(nil, bits), Xor: []byte{0, 0, 0, 0}},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{0, 0, 0, 0}},
	}
}

func verdict(k expr.VerdictKind) expr.Any { return &expr.Verdict{Kind: k} }

func jump(chain string) expr.Any { return &expr.Verdict{Kind: expr.VerdictJump, Chain: chain} }

func gotoChain(chain string) expr.Any { return &expr.Verdict{Kind: expr.VerdictGoto, Chain: chain} }

// log sends the packet's first bytes to the audit's NFLOG group with the
// prefix "warren:<A|D>:<reason>". A queue threshold of 1 makes the kernel
// deliver each record at once instead of batching them for up to a second.
func (r *nftRules) log(v, reason string) expr.Any {
	return &expr.Log{
		Key:        1<<unix.NFTA_LOG_GROUP | 1<<unix.NFTA_LOG_PREFIX | 1<<unix.NFTA_LOG_SNAPLEN | 1<<unix.NFTA_LOG_QTHRESHOLD,
		Group:      r.group,
		Data:       []byte(logPrefix + v + ":" + reason),
		Snaplen:    snaplen,
		QThreshold: 1,
	}
}

// snaplen covers an IPv4 header with options and the ports of TCP or UDP.
const snaplen = 64
