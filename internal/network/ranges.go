package network

import (
	"encoding/binary"
	"net/netip"
	"slices"
)

// span is an inclusive range of IPv4 addresses as integers. The kernel's
// interval sets refuse overlapping elements (nft's CLI merges them before
// sending; the netlink library does not), and the operator's exceptions are
// subtracted from the always-denied ranges, so policies are turned into
// sorted, disjoint spans here before they reach nftables.
type span struct{ lo, hi uint32 }

func v4(a netip.Addr) uint32 {
	b := a.As4()
	return binary.BigEndian.Uint32(b[:])
}

func addrOf(u uint32) netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], u)
	return netip.AddrFrom4(b)
}

func spanOf(p netip.Prefix) span {
	p = p.Masked()
	lo := v4(p.Addr())
	hostBits := 32 - p.Bits()
	if hostBits == 32 {
		return span{0, ^uint32(0)}
	}
	return span{lo, lo | (uint32(1)<<hostBits - 1)}
}

// spans is a sorted list of disjoint, non-adjacent spans.
type spans []span

// spansOf merges IPv4 prefixes into spans; IPv6 prefixes are ignored (the
// caller has already decided what IPv6 means).
func spansOf(ps ...netip.Prefix) spans {
	var out spans
	for _, p := range ps {
		if p.Addr().Is4() {
			out = append(out, spanOf(p))
		}
	}
	return out.normalize()
}

func (s spans) normalize() spans {
	if len(s) == 0 {
		return nil
	}
	s = slices.Clone(s)
	slices.SortFunc(s, func(a, b span) int {
		switch {
		case a.lo < b.lo:
			return -1
		case a.lo > b.lo:
			return 1
		}
		return 0
	})
	out := spans{s[0]}
	for _, r := range s[1:] {
		last := &out[len(out)-1]
		// Overlapping or adjacent (guarding the +1 against overflow).
		if last.hi == ^uint32(0) || r.lo <= last.hi+1 {
			last.hi = max(last.hi, r.hi)
			continue
		}
		out = append(out, r)
	}
	return out
}

func (s spans) union(t spans) spans {
	return append(slices.Clone(s), t...).normalize()
}

// minus returns s without the addresses in t.
func (s spans) minus(t spans) spans {
	var out spans
	for _, r := range s {
		cur := []span{r}
		for _, c := range t {
			var next []span
			for _, x := range cur {
				if c.hi < x.lo || c.lo > x.hi {
					next = append(next, x)
					continue
				}
				if c.lo > x.lo {
					next = append(next, span{x.lo, c.lo - 1})
				}
				if c.hi < x.hi {
					next = append(next, span{c.hi + 1, x.hi})
				}
			}
			cur = next
		}
		out = append(out, cur...)
	}
	return out.normalize()
}

func (s spans) contains(a netip.Addr) bool {
	if !a.Is4() {
		return false
	}
	u := v4(a)
	i, _ := slices.BinarySearchFunc(s, u, func(r span, u uint32) int {
		switch {
		case r.hi < u:
			return -1
		case r.lo > u:
			return 1
		}
		return 0
	})
	return i < len(s) && s[i].lo <= u && u <= s[i].hi
}

// all reports whether s is the whole IPv4 space.
func (s spans) all() bool {
	return len(s) == 1 && s[0].lo == 0 && s[0].hi == ^uint32(0)
}
