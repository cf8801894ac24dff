package network

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/warrenhq/warren/internal/errdefs"
)

// Policy is a sandbox's egress policy, in E2B's shape.
//
// Each AllowOut/DenyOut entry is an IPv4 CIDR ("198.51.100.0/24"), a bare
// address ("198.51.100.7"), a domain name ("api.example.com") or a wildcard
// domain ("*.example.com": every name below example.com, not example.com
// itself). Names are enforced by the resolver on the bridge: it answers only
// allowed names and opens the addresses it answered with, for the record's
// TTL.
//
// The verdict for a destination, first match wins:
//  1. always denied (link-local and metadata, private ranges, loopback, the
//     host, other sandboxes) unless the operator permitted the range;
//  2. DenyOut (deny wins over allow: warren's rule, where E2B lets allow win);
//  3. AllowOut, and the addresses the resolver answered for allowed names;
//  4. the default: allowed when AllowInternetAccess is set and DenyOut does
//     not list 0.0.0.0/0, denied otherwise.
//
// A DenyOut entry of 0.0.0.0/0 therefore means "deny by default" rather than
// "deny everything": E2B documents allow_internet_access=false as equivalent
// to it, and E2B clients write {allowOut: [x], denyOut: ["0.0.0.0/0"]} to mean
// "only x". Sandboxes get IPv4 only: an IPv6 entry in AllowOut is refused, in
// DenyOut it is accepted and changes nothing (IPv6 egress is always denied).
type Policy struct {
	AllowInternetAccess bool     `json:"allowInternetAccess"`
	AllowOut            []string `json:"allowOut,omitempty"`
	DenyOut             []string `json:"denyOut,omitempty"`
	// Rules are E2B's network rules: per domain, transforms the egress
	// proxy applies to HTTP(S) requests (egressrules.go). A sandbox with
	// rules has its TCP to ports 80 and 443 sent through the proxy.
	Rules map[string][]Rule `json:"rules,omitempty"`
	// EgressProxy tunnels all the sandbox's allowed TCP through a SOCKS5
	// server (egressrules.go).
	EgressProxy *EgressProxy `json:"egressProxy,omitempty"`
}

// maxEntries bounds each list: every entry becomes kernel state.
const maxEntries = 1024

// Validate reports the first malformed entry, as an errdefs.ErrInvalid.
func (p Policy) Validate() error {
	_, err := compile(p)
	return err
}

// compiled is a validated policy in the form the rules and the resolver use.
type compiled struct {
	defaultAllow bool
	allow, deny  spans
	allowNames   []namePattern
	denyNames    []namePattern
	rules        []ruleSet
	egressProxy  *EgressProxy
}

// proxied reports whether the sandbox's web traffic goes through the
// egress proxy; tunnelled, whether all its TCP does.
func (c *compiled) proxied() bool   { return len(c.rules) > 0 || c.egressProxy != nil }
func (c *compiled) tunnelled() bool { return c.egressProxy != nil }

type namePattern struct {
	name     string // lower case, no trailing dot, without "*."
	wildcard bool
}

func (n namePattern) String() string {
	if n.wildcard {
		return "*." + n.name
	}
	return n.name
}

// match reports whether q (normalized by normalizeName) is covered.
func (n namePattern) match(q string) bool {
	if n.wildcard {
		return strings.HasSuffix(q, "."+n.name)
	}
	return q == n.name
}

func compile(p Policy) (*compiled, error) {
	c := &compiled{defaultAllow: p.AllowInternetAccess}
	for _, l := range []struct {
		field   string
		entries []string
		allow   bool
	}{{"allowOut", p.AllowOut, true}, {"denyOut", p.DenyOut, false}} {
		if len(l.entries) > maxEntries {
			return nil, fmt.Errorf("%s has %d entries, at most %d are allowed: %w", l.field, len(l.entries), maxEntries, errdefs.ErrInvalid)
		}
		var prefixes []netip.Prefix
		for i, raw := range l.entries {
			pfx, name, err := parseEntry(raw)
			if err != nil {
				return nil, fmt.Errorf("%s[%d] %q: %s: %w", l.field, i, truncate(raw, 64), err.Error(), errdefs.ErrInvalid)
			}
			switch {
			case name != nil && l.allow:
				c.allowNames = append(c.allowNames, *name)
			case name != nil:
				c.denyNames = append(c.denyNames, *name)
			case pfx.Addr().Is6() && l.allow:
				return nil, fmt.Errorf("%s[%d] %q: IPv6 destinations are not supported (sandboxes have IPv4 only): %w", l.field, i, raw, errdefs.ErrInvalid)
			case pfx.Addr().Is6():
				// All IPv6 egress is denied already.
			case !l.allow && pfx.Bits() == 0:
				c.defaultAllow = false
			default:
				prefixes = append(prefixes, pfx)
			}
		}
		if l.allow {
			c.allow = spansOf(prefixes...)
		} else {
			c.deny = spansOf(prefixes...)
		}
	}
	rules, err := checkRules(p.Rules)
	if err != nil {
		return nil, err
	}
	c.rules = rules
	if err := checkEgressProxy(p.EgressProxy); err != nil {
		return nil, err
	}
	c.egressProxy = p.EgressProxy
	return c, nil
}

// opensAnything reports whether the policy can let a connection through.
func (c *compiled) opensAnything() bool {
	return c.defaultAllow || len(c.allow) > 0 || len(c.allowNames) > 0
}

// parseEntry reads one list entry as a prefix or a name pattern.
func parseEntry(raw string) (netip.Prefix, *namePattern, error) {
	s := strings.TrimSpace(raw)
	if s == "" {
		return netip.Prefix{}, nil, fmt.Errorf("empty entry")
	}
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, nil, fmt.Errorf("not a CIDR block (want e.g. 198.51.100.0/24)")
		}
		return p.Masked(), nil, nil
	}
	if a, err := netip.ParseAddr(s); err == nil {
		a = a.Unmap()
		if a.Zone() != "" {
			return netip.Prefix{}, nil, fmt.Errorf("an address with a zone is not a destination")
		}
		return netip.PrefixFrom(a, a.BitLen()), nil, nil
	}
	n, err := parseNamePattern(s)
	if err != nil {
		return netip.Prefix{}, nil, err
	}
	return netip.Prefix{}, &n, nil
}

func parseNamePattern(s string) (namePattern, error) {
	s = strings.ToLower(strings.TrimSuffix(s, "."))
	var n namePattern
	if rest, ok := strings.CutPrefix(s, "*."); ok {
		n.wildcard = true
		s = rest
	}
	if s == "" || s == "*" {
		return n, fmt.Errorf("a bare wildcard matches every name; use allowInternetAccess or 0.0.0.0/0 instead")
	}
	if len(s) > 253 {
		return n, fmt.Errorf("a domain name is at most 253 characters")
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 {
			return n, fmt.Errorf("not an address, CIDR block or domain name (empty or over-long label)")
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' && c != '_' {
				if c == '*' {
					return n, fmt.Errorf("a wildcard is allowed only as the whole first label (*.example.com)")
				}
				return n, fmt.Errorf("not an address, CIDR block or domain name (character %q)", c)
			}
		}
	}
	n.name = s
	return n, nil
}

// normalizeName turns a DNS question name into the form patterns match.
func normalizeName(q string) string {
	return strings.ToLower(strings.TrimSuffix(q, "."))
}

// nameVerdict decides a DNS question. reason is ReasonPolicy when a DenyOut
// pattern matched, ReasonDomain when an AllowOut pattern did (only then are
// the answered addresses opened: under a default-allow policy they are
// reachable anyway), ReasonDefault otherwise.
func (c *compiled) nameVerdict(q string) (allowed bool, reason string) {
	for _, n := range c.denyNames {
		if n.match(q) {
			return false, ReasonPolicy
		}
	}
	for _, n := range c.allowNames {
		if n.match(q) {
			return true, ReasonDomain
		}
	}
	return c.defaultAllow, ReasonDefault
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
