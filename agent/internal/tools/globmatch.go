package tools

import (
	"fmt"
	"path"
	"strings"
)

// maxBraceExpansions bounds what one pattern's {a,b} groups expand to.
const maxBraceExpansions = 256

// globPattern is a parsed glob: its {a,b} alternatives expanded, each split
// into slash-separated segments, where a "**" segment matches any number of
// directories (none included) and the other segments follow path.Match
// (*, ?, [a-z], \ escapes; * and ? never match a slash, and they do match a
// leading dot).
type globPattern struct {
	alts [][]string
}

func compileGlob(pattern string) (*globPattern, error) {
	expanded, err := expandBraces(pattern)
	if err != nil {
		return nil, err
	}
	g := &globPattern{}
	for _, p := range expanded {
		var segs []string
		for _, s := range strings.Split(p, "/") {
			if s == "" || s == "." {
				continue // "a//b", "./a"
			}
			if strings.Contains(s, "**") && s != "**" {
				return nil, fmt.Errorf("%q: ** must be a whole path segment (as in src/**/*.go); inside a segment use *", pattern)
			}
			if _, err := path.Match(s, ""); err != nil {
				return nil, fmt.Errorf("%q: bad segment %q (an unclosed [ or a trailing \\)", pattern, s)
			}
			if len(segs) > 0 && s == "**" && segs[len(segs)-1] == "**" {
				continue
			}
			segs = append(segs, s)
		}
		if len(segs) == 0 {
			return nil, fmt.Errorf("%q matches nothing: give a pattern such as **/*.go", pattern)
		}
		g.alts = append(g.alts, segs)
	}
	return g, nil
}

// match reports whether rel (slash-separated) matches some alternative.
func (g *globPattern) match(rel string) bool {
	segs := strings.Split(rel, "/")
	for _, a := range g.alts {
		if matchSegs(a, segs) {
			return true
		}
	}
	return false
}

// canEnter reports whether something inside the directory rel could match.
func (g *globPattern) canEnter(rel string) bool {
	segs := strings.Split(rel, "/")
	for _, a := range g.alts {
		if prefixCanMatch(a, segs) {
			return true
		}
	}
	return false
}

// mentions reports whether some alternative names name on purpose (a
// segment starting with the same dot-name, not a bare wildcard).
func (g *globPattern) mentions(name string) bool {
	for _, a := range g.alts {
		for _, s := range a {
			if ok, _ := path.Match(s, name); ok && strings.HasPrefix(s, name[:1]) {
				return true
			}
		}
	}
	return false
}

// takeLiteralPrefix removes the leading segments every alternative shares
// and that hold no wildcard, keeping at least one segment in each, and
// returns them: the walk can start there instead of at the root.
func (g *globPattern) takeLiteralPrefix() []string {
	var prefix []string
	for {
		seg := g.alts[0][0]
		for _, a := range g.alts {
			if len(a) < 2 || hasMeta(a[0]) || a[0] != seg {
				return prefix
			}
		}
		prefix = append(prefix, seg)
		for k := range g.alts {
			g.alts[k] = g.alts[k][1:]
		}
	}
}

func hasMeta(s string) bool { return strings.ContainsAny(s, `*?[\`) }

func matchSegs(pat, segs []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			rest := pat[1:]
			if len(rest) == 0 {
				return true
			}
			for i := 0; i <= len(segs); i++ {
				if matchSegs(rest, segs[i:]) {
					return true
				}
			}
			return false
		}
		if len(segs) == 0 {
			return false
		}
		if ok, _ := path.Match(pat[0], segs[0]); !ok {
			return false
		}
		pat, segs = pat[1:], segs[1:]
	}
	return len(segs) == 0
}

// prefixCanMatch reports whether a path starting with the directory segs
// and going deeper could match pat.
func prefixCanMatch(pat, segs []string) bool {
	if len(segs) == 0 {
		return len(pat) > 0
	}
	if len(pat) == 0 {
		return false
	}
	if pat[0] == "**" {
		return prefixCanMatch(pat[1:], segs) || prefixCanMatch(pat, segs[1:])
	}
	if ok, _ := path.Match(pat[0], segs[0]); !ok {
		return false
	}
	return prefixCanMatch(pat[1:], segs[1:])
}

// expandBraces expands {a,b,c} groups (nested ones too) the way bash does;
// a group without a comma, or an unclosed one, stays literal.
func expandBraces(p string) ([]string, error) {
	out, err := expandInto(nil, p)
	if err != nil {
		return nil, err
	}
	return out, nil
}

func expandInto(out []string, p string) ([]string, error) {
	depth, start := 0, -1
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '\\':
			i++
		case '{':
			if depth == 0 {
				start = i
			}
			depth++
		case '}':
			if depth == 0 {
				continue
			}
			depth--
			if depth > 0 {
				continue
			}
			alts := splitTopLevel(p[start+1 : i])
			if len(alts) < 2 {
				continue // literal braces
			}
			for _, a := range alts {
				var err error
				if out, err = expandInto(out, p[:start]+a+p[i+1:]); err != nil {
					return nil, err
				}
				if len(out) > maxBraceExpansions {
					return nil, fmt.Errorf("%q expands to more than %d patterns; use fewer {a,b} groups", p, maxBraceExpansions)
				}
			}
			return out, nil
		}
	}
	return append(out, p), nil
}

// splitTopLevel splits s at the commas outside nested braces.
func splitTopLevel(s string) []string {
	var parts []string
	depth, last := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '{':
			depth++
		case '}':
			depth--
		case ',':
			if depth == 0 {
				parts = append(parts, s[last:i])
				last = i + 1
			}
		}
	}
	return append(parts, s[last:])
}
