package network

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/net/http/httpguts"

	"github.com/warrenhq/warren/internal/errdefs"
)

// Rule is one of E2B's network rules for a domain: a transform applied to
// the sandbox's HTTP and HTTPS requests to it by the egress proxy. A rule
// never allows a destination: AllowOut and DenyOut still decide.
type Rule struct {
	Transform *Transform `json:"transform,omitempty"`
}

// Transform sets (adds or replaces) request headers. Values may hold
// ${e2b.secrets.<name>} placeholders, resolved by the proxy.
type Transform struct {
	Headers map[string]string `json:"headers,omitempty"`
}

// Bounds on rules: each is held in memory and applied to every request.
const (
	maxRuleDomains   = 256
	maxRulesPer      = 16
	maxHeaders       = 64
	maxHeaderValue   = 8 << 10
	maxRuleDomainLen = 253
)

// checkRules validates rules: keys are domain names or *.domain patterns
// (as in AllowOut), header names are HTTP tokens and values are valid
// header values.
func checkRules(rules map[string][]Rule) ([]ruleSet, error) {
	if len(rules) > maxRuleDomains {
		return nil, fmt.Errorf("rules name %d domains, at most %d are allowed: %w", len(rules), maxRuleDomains, errdefs.ErrInvalid)
	}
	out := make([]ruleSet, 0, len(rules))
	for domain, list := range rules {
		n, err := parseNamePattern(strings.TrimSpace(domain))
		if err != nil || len(domain) > maxRuleDomainLen {
			msg := "too long"
			if err != nil {
				msg = err.Error()
			}
			return nil, fmt.Errorf("rules[%q]: %s: %w", truncate(domain, 64), msg, errdefs.ErrInvalid)
		}
		if len(list) > maxRulesPer {
			return nil, fmt.Errorf("rules[%q] has %d rules, at most %d are allowed: %w", n, len(list), maxRulesPer, errdefs.ErrInvalid)
		}
		for i, r := range list {
			if r.Transform == nil {
				continue
			}
			if len(r.Transform.Headers) > maxHeaders {
				return nil, fmt.Errorf("rules[%q][%d].transform.headers has %d entries, at most %d: %w", n, i, len(r.Transform.Headers), maxHeaders, errdefs.ErrInvalid)
			}
			for h, v := range r.Transform.Headers {
				if !httpguts.ValidHeaderFieldName(h) {
					return nil, fmt.Errorf("rules[%q][%d].transform.headers: %q is not a valid HTTP header name: %w", n, i, truncate(h, 64), errdefs.ErrInvalid)
				}
				if len(v) > maxHeaderValue || !httpguts.ValidHeaderFieldValue(v) {
					return nil, fmt.Errorf("rules[%q][%d].transform.headers[%q]: not a valid HTTP header value (no control characters, at most %d bytes): %w", n, i, h, maxHeaderValue, errdefs.ErrInvalid)
				}
			}
		}
		out = append(out, ruleSet{pattern: n, rules: list})
	}
	// Exact names first, then the longest wildcard suffix: the order
	// RulesFor looks them up in (E2B's precedence).
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].pattern, out[j].pattern
		if a.wildcard != b.wildcard {
			return !a.wildcard
		}
		if len(a.name) != len(b.name) {
			return len(a.name) > len(b.name)
		}
		return a.name < b.name
	})
	return out, nil
}

type ruleSet struct {
	pattern namePattern
	rules   []Rule
}

// rulesFor returns the rules of the first matching domain (rule sets are
// not merged), and whether any matched.
func (c *compiled) rulesFor(host string) ([]Rule, bool) {
	q := normalizeName(host)
	for _, rs := range c.rules {
		if rs.pattern.match(q) {
			return rs.rules, true
		}
	}
	return nil, false
}

// EgressProxy is E2B's network.egressProxy: a SOCKS5 server (RFC 1928,
// with RFC 1929 username/password auth when Username is set) that every
// TCP connection the sandbox's policy allows is tunnelled through, by the
// egress proxy, after the rules' transforms. When it is unreachable the
// sandbox's connections fail: nothing goes out directly.
type EgressProxy struct {
	Address  string `json:"address"`
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
}

// checkEgressProxy validates an egressProxy: host:port, and credentials
// within RFC 1929's 255 bytes.
func checkEgressProxy(e *EgressProxy) error {
	if e == nil {
		return nil
	}
	host, port, err := net.SplitHostPort(e.Address)
	p, perr := strconv.Atoi(port)
	if err != nil || host == "" || perr != nil || p < 1 || p > 65535 {
		return fmt.Errorf("egressProxy.address %q: want host:port, e.g. 203.0.113.7:1080: %w", truncate(e.Address, 64), errdefs.ErrInvalid)
	}
	if len(e.Username) > 255 || len(e.Password) > 255 {
		return fmt.Errorf("egressProxy: username and password are at most 255 bytes each (RFC 1929): %w", errdefs.ErrInvalid)
	}
	if e.Password != "" && e.Username == "" {
		return fmt.Errorf("egressProxy: a password needs a username: %w", errdefs.ErrInvalid)
	}
	return nil
}

// EgressProxy is the sandbox's SOCKS5 upstream, or nil.
func (t EgressTarget) EgressProxy() *EgressProxy {
	if t.pol == nil {
		return nil
	}
	return t.pol.egressProxy
}
