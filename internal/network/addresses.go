package network

import (
	"fmt"
	"net/netip"
	"sync"

	"github.com/warrenhq/warren/internal/errdefs"
)

// addrPool hands out the sandboxes' addresses from the subnet. It holds the
// addresses of sandboxes not adopted yet too (an earlier run's, found on
// their veths), so that no new sandbox takes one. Its lock is a leaf: no
// other lock is taken while it is held.
type addrPool struct {
	mu     sync.Mutex
	subnet netip.Prefix
	// first and last bound what may be handed out: not the network, the
	// gateway or the broadcast address.
	first, last uint32
	used        map[netip.Addr]string // address → the sandbox holding it
	cursor      uint32                // the next address to try
}

func newAddrPool(subnet netip.Prefix, gateway netip.Addr) *addrPool {
	return &addrPool{
		subnet: subnet,
		first:  v4(gateway) + 1,
		last:   spanOf(subnet).hi - 1,
		used:   map[netip.Addr]string{},
		cursor: v4(gateway) + 1,
	}
}

// allocate picks a free address, round-robin through the subnet so that a
// freed address is reused as late as possible (late audit records and
// conntrack entries of its last owner then cannot be mistaken for a new
// sandbox's).
func (p *addrPool) allocate(id string) (netip.Addr, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.last - p.first + 1
	for i := uint32(0); i < n; i++ {
		c := p.cursor
		if c < p.first || c > p.last {
			c = p.first
		}
		p.cursor = c + 1
		a := addrOf(c)
		if _, taken := p.used[a]; !taken {
			p.used[a] = id
			return a, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("network: no free address left in %s: %w", p.subnet, errdefs.ErrResourceExhausted)
}

// hold marks addr as sandbox id's.
func (p *addrPool) hold(addr netip.Addr, id string) {
	p.mu.Lock()
	p.used[addr] = id
	p.mu.Unlock()
}

// release frees addr, whoever holds it.
func (p *addrPool) release(addr netip.Addr) {
	p.mu.Lock()
	delete(p.used, addr)
	p.mu.Unlock()
}

// releaseOwner frees every address sandbox id holds and returns them.
func (p *addrPool) releaseOwner(id string) []netip.Addr {
	p.mu.Lock()
	defer p.mu.Unlock()
	var freed []netip.Addr
	for a, owner := range p.used {
		if owner == id {
			delete(p.used, a)
			freed = append(freed, a)
		}
	}
	return freed
}

// holds reports whether sandbox id holds an address.
func (p *addrPool) holds(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, owner := range p.used {
		if owner == id {
			return true
		}
	}
	return false
}
