// Package linemerge merges two edits of one text file line by line
// (diff3): lines changed on one side only take that side; a span changed
// differently on both sides is a conflict, written with conflict markers
// or resolved by a style.
//
// Each side is diffed against the base (Myers' shortest edit script). Base
// lines kept unchanged by both sides are the stable points; between two
// stable points, a span that only one side changed takes that side's
// lines, one both changed the same way takes them once, and anything else
// conflicts.
package linemerge

import "bytes"

// Style says how a conflicting span is written.
type Style int

const (
	// Markers writes both sides between conflict markers.
	Markers Style = iota
	// Ours keeps our side's lines.
	Ours
	// Theirs takes their side's lines.
	Theirs
	// Union keeps our lines then theirs, without markers.
	Union
)

// Conflict markers, as git writes them.
const (
	MarkerOurs   = "<<<<<<< ours\n"
	MarkerSep    = "=======\n"
	MarkerTheirs = ">>>>>>> theirs\n"
)

// Result is a merged file.
type Result struct {
	Data []byte
	// Conflicts counts the spans both sides changed differently (resolved
	// by the style, or written between markers).
	Conflicts int
}

// Merge merges the changes from base to ours and from base to theirs.
func Merge(base, ours, theirs []byte, style Style) Result {
	b, a, t := splitLines(base), splitLines(ours), splitLines(theirs)
	ma, mt := matches(b, a), matches(b, t)
	var out bytes.Buffer
	var res Result
	o, i, j := 0, 0, 0 // next line of base, ours, theirs
	for {
		// The next base line both sides kept, at or after the cursors.
		s := o
		for s < len(b) && (ma[s] < i || mt[s] < j) {
			s++
		}
		ei, ej := len(a), len(t)
		if s < len(b) {
			ei, ej = ma[s], mt[s]
		}
		res.Conflicts += chunk(&out, b[o:s], a[i:ei], t[j:ej], style)
		if s >= len(b) {
			break
		}
		out.Write(b[s])
		o, i, j = s+1, ei+1, ej+1
	}
	res.Data = out.Bytes()
	return res
}

// chunk writes the merge of one span between stable lines and returns 1 if
// it conflicted.
func chunk(out *bytes.Buffer, base, ours, theirs [][]byte, style Style) int {
	switch {
	case equal(ours, theirs), equal(theirs, base):
		writeLines(out, ours)
		return 0
	case equal(ours, base):
		writeLines(out, theirs)
		return 0
	}
	switch style {
	case Ours:
		writeLines(out, ours)
	case Theirs:
		writeLines(out, theirs)
	case Union:
		writeTerminated(out, ours)
		writeLines(out, theirs)
	default:
		out.WriteString(MarkerOurs)
		writeTerminated(out, ours)
		out.WriteString(MarkerSep)
		writeTerminated(out, theirs)
		out.WriteString(MarkerTheirs)
	}
	return 1
}

func equal(x, y [][]byte) bool {
	if len(x) != len(y) {
		return false
	}
	for k := range x {
		if !bytes.Equal(x[k], y[k]) {
			return false
		}
	}
	return true
}

func writeLines(out *bytes.Buffer, lines [][]byte) {
	for _, l := range lines {
		out.Write(l)
	}
}

// writeTerminated writes lines and ends the last with a newline if it has
// none: something (a marker, the other side) follows it.
func writeTerminated(out *bytes.Buffer, lines [][]byte) {
	writeLines(out, lines)
	if n := len(lines); n > 0 && !bytes.HasSuffix(lines[n-1], []byte("\n")) {
		out.WriteByte('\n')
	}
}

// IsText says whether data looks like text a line merge can handle: no
// NUL byte in its first 8 KiB (what git checks).
func IsText(data []byte) bool {
	return bytes.IndexByte(data[:min(len(data), 8<<10)], 0) < 0
}
