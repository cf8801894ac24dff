package tools

import (
	"regexp/syntax"
	"strings"
	"unicode/utf8"
)

// requiredLiteral finds a literal that every match of expr contains — the
// longest one the top of the expression requires — for grep's prefilter.
// fold says it matches case-insensitively; ok is false when there is none
// worth using (alternations, optional parts, non-ASCII folding, a line
// break that line matching never sees).
func requiredLiteral(expr string) (lit string, fold, ok bool) {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return "", false, false
	}
	lit, fold, ok = longestRequired(re.Simplify())
	if !ok || lit == "" || strings.Contains(lit, "\n") {
		return "", false, false
	}
	if fold {
		for i := 0; i < len(lit); i++ {
			if lit[i] >= utf8.RuneSelf {
				return "", false, false
			}
		}
		lit = strings.ToLower(lit)
	}
	return lit, fold, true
}

func longestRequired(re *syntax.Regexp) (string, bool, bool) {
	switch re.Op {
	case syntax.OpLiteral:
		return string(re.Rune), re.Flags&syntax.FoldCase != 0, true
	case syntax.OpCapture, syntax.OpPlus:
		return longestRequired(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return longestRequired(re.Sub[0])
		}
	case syntax.OpConcat:
		best, bestFold, found := "", false, false
		for _, sub := range re.Sub {
			if l, f, ok := longestRequired(sub); ok && len(l) > len(best) {
				best, bestFold, found = l, f, true
			}
		}
		return best, bestFold, found
	}
	return "", false, false
}
