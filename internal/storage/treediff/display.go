package treediff

import (
	"strconv"
	"strings"
	"unicode"
)

// DisplayPath is p as a line of a diff shows it: as it is when every rune
// is printable, else quoted Go-style (as git quotes unusual names). A
// sandbox names its own files, so a raw name could end a line and forge
// the entries after it, or send escape codes to the reader's terminal.
func DisplayPath(p string) string {
	odd := strings.ContainsFunc(p, func(r rune) bool {
		return r == '"' || r == '\\' || r == unicode.ReplacementChar || !unicode.IsPrint(r)
	})
	if odd {
		return strconv.Quote(p)
	}
	return p
}
