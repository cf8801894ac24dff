package secrets

import (
	"fmt"
	"strings"

	"github.com/warrenhq/warren/internal/errdefs"
)

// A placeholder stands for a secret's value: ${e2b.secrets.<name>}.
const (
	placeholderOpen  = "${e2b.secrets."
	placeholderClose = "}"
)

// Placeholder is the text that stands for secret name.
func Placeholder(name string) string { return placeholderOpen + name + placeholderClose }

// Names returns the secret names s's placeholders refer to, lower-cased,
// in order, each once.
func Names(s string) []string {
	var out []string
	seen := map[string]bool{}
	for rest := s; ; {
		i := strings.Index(rest, placeholderOpen)
		if i < 0 {
			return out
		}
		rest = rest[i+len(placeholderOpen):]
		j := strings.Index(rest, placeholderClose)
		if j < 0 {
			return out
		}
		name := strings.ToLower(rest[:j])
		rest = rest[j+1:]
		if name != "" && !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
}

// Expand replaces every placeholder in s with value(name).
func Expand(s string, value func(name string) string) string {
	if !strings.Contains(s, placeholderOpen) {
		return s
	}
	var b strings.Builder
	for {
		i := strings.Index(s, placeholderOpen)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		j := strings.Index(s[i+len(placeholderOpen):], placeholderClose)
		if j < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		b.WriteString(value(strings.ToLower(s[i+len(placeholderOpen) : i+len(placeholderOpen)+j])))
		s = s[i+len(placeholderOpen)+j+1:]
	}
}

// CheckHostPatterns validates domain patterns ("api.example.com", or
// "*.example.com": every name below example.com, not itself) and returns
// them lower-cased without trailing dots.
func CheckHostPatterns(field string, patterns []string) ([]string, error) {
	if len(patterns) > maxAllowedHosts {
		return nil, fmt.Errorf("%s has %d entries, at most %d are allowed: %w", field, len(patterns), maxAllowedHosts, errdefs.ErrInvalid)
	}
	if patterns == nil {
		return nil, nil
	}
	out := make([]string, 0, len(patterns))
	for i, p := range patterns {
		n, err := CheckHostPattern(p)
		if err != nil {
			return nil, fmt.Errorf("%s[%d]: %w", field, i, err)
		}
		out = append(out, n)
	}
	return out, nil
}

// CheckHostPattern validates one domain pattern (see CheckHostPatterns).
func CheckHostPattern(p string) (string, error) {
	n := strings.ToLower(strings.TrimSuffix(strings.TrimSpace(p), "."))
	name := strings.TrimPrefix(n, "*.")
	if name == "" || len(n) > 253 || strings.Contains(name, "*") {
		return "", fmt.Errorf("%q is not a domain name or *.domain pattern (a bare * is not allowed): %w", truncate(p), errdefs.ErrInvalid)
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 {
			return "", fmt.Errorf("%q is not a domain name: %w", truncate(p), errdefs.ErrInvalid)
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", fmt.Errorf("%q is not a domain name: %w", truncate(p), errdefs.ErrInvalid)
			}
		}
	}
	return n, nil
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// MatchHost reports whether host (lower case, no port) matches pattern.
func MatchHost(pattern, host string) bool {
	if suffix, ok := strings.CutPrefix(pattern, "*."); ok {
		return strings.HasSuffix(host, "."+suffix)
	}
	return host == pattern
}

// HostAllowed reports whether a secret allowed on hosts may go to host;
// no list at all means the hosts of the sandbox's rules, which the caller
// checks (the proxy only opens requests to those).
func HostAllowed(hosts []string, host string) bool {
	if len(hosts) == 0 {
		return true
	}
	for _, p := range hosts {
		if MatchHost(p, host) {
			return true
		}
	}
	return false
}
