package tools

import (
	"fmt"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// maxBraceExpansions bounds what one pattern's {a,b} groups expand to.
const maxBraceExpansions = 256

// globPattern is a parsed glob: its {a,b} alternatives expanded, each split
// into slash-separated segments, where a "**" segment matches any number of
// directories (none included) and the other segments are doublestar's
// (*, ?, [a-z], [^a-z] or [!a-z], \ escapes; * and ? never match a slash,
// and they do match a leading dot). doublestar matches whole paths, but it
// has no way to say whether a directory could hold a match: the walk's
// pruning (canEnter, the literal prefix it starts from, mentions) needs the
// alternatives expanded and split into segments, so that stays here, and
// the braces are expanded here, bash's way, before doublestar sees them.
type globPattern struct {
	alts [][]string
	// whole holds each alternative joined again, for doublestar.
	whole []string
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
			s = escapeBraces(s) // literal after expandBraces; doublestar would read them as a group
			if !doublestar.ValidatePattern(s) {
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
		g.whole = append(g.whole, strings.Join(segs, "/"))
	}
	return g, nil
}

// escapeBraces escapes the braces expandBraces left alone (a group without
// a comma): bash and this tool read them literally.
func escapeBraces(s string) string {
	if !strings.ContainsAny(s, "{}") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			b.WriteByte(s[i])
			if i+1 < len(s) {
				i++
				b.WriteByte(s[i])
			}
			continue
		case '{', '}':
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// match reports whether rel (slash-separated) matches some alternative.
func (g *globPattern) match(rel string) bool {
	for _, w := range g.whole {
		if doublestar.MatchUnvalidated(w, rel) {
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
			if doublestar.MatchUnvalidated(s, name) && strings.HasPrefix(s, name[:1]) {
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
			g.whole[k] = strings.Join(g.alts[k], "/")
		}
	}
}

func hasMeta(s string) bool { return strings.ContainsAny(s, `*?[\`) }

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
	if !doublestar.MatchUnvalidated(pat[0], segs[0]) {
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
