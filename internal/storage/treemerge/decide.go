package treemerge

import (
	"context"
	"errors"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/linemerge"
)

// merger holds a merge's open trees.
type merger struct {
	base, ours, theirs *tree
	strategy           Strategy
	dryRun             bool
	// oursRenamed maps a file our side renamed (same content) to its new
	// path; theirsRenamed theirs, for files our side changed.
	oursRenamed, theirsRenamed map[string]string
	theirsRenamedTo            map[string]string // theirsRenamed reversed
}

// open opens the trees (base may be "": a cherry-pick has none).
func open(base, ours, theirs string) (*merger, error) {
	m := &merger{}
	var err error
	if base != "" {
		if m.base, err = openTree(base); err != nil {
			return nil, err
		}
	}
	if m.ours, err = openTree(ours); err == nil {
		m.theirs, err = openTree(theirs)
	}
	if err != nil {
		m.close()
		return nil, err
	}
	return m, nil
}

func (m *merger) close() {
	for _, t := range []*tree{m.base, m.ours, m.theirs} {
		if t != nil {
			t.Close()
		}
	}
}

// plan is a path's entry and what to write for it (nothing if act is nil).
type plan struct {
	entry Entry
	act   func() error
	// late runs after the other writes, deepest path first: removals, and
	// directories replaced by something else (their entries go first).
	late bool
}

// decide settles path p, which theirs changed (and ours too if
// oursChanged). A plan with an empty path leaves p out of the answer (a
// directory whose entries alone changed).
func (m *merger) decide(p string, oursChanged bool) (plan, error) {
	b, err := m.base.stat(p)
	if err != nil {
		return plan{}, err
	}
	o, err := m.ours.stat(p)
	if err != nil {
		return plan{}, err
	}
	t, err := m.theirs.stat(p)
	if err != nil {
		return plan{}, err
	}
	if pl, ok, err := m.renamed(p, b, o, t, oursChanged); ok || err != nil {
		return pl, err
	}
	if o.typ == "dir" && t.typ == "dir" && (o.mode == t.mode || o.mode != b.mode) {
		return plan{}, nil // kept: only its entries (or our mode) changed
	}
	if !oursChanged {
		if t.typ == "other" {
			return m.conflict(p, b, o, t, "their side made it a device, fifo or socket, which a merge does not copy")
		}
		return m.take(p, o, t, "changed on their side only"), nil
	}
	same, err := sameContent(m.ours, m.theirs, p, o, t)
	if err != nil {
		return plan{}, err
	}
	if same {
		return plan{entry: Entry{Path: p, Outcome: Taken, Reason: "both sides made the same change"}}, nil
	}
	if o.typ == "file" && t.typ == "file" && (b.typ == "file" || !b.exists()) &&
		max(b.size, o.size, t.size) <= maxLineMerge {
		return m.lineMerge(p, b, o, t)
	}
	return m.conflict(p, b, o, t, conflictReason(b, o, t))
}

// take plans p to become what it is in theirs (t).
func (m *merger) take(p string, o, t node, reason string) plan {
	return plan{
		entry: Entry{Path: p, Outcome: Taken, Reason: reason},
		act:   func() error { return copyNode(m.ours, m.theirs, p, t) },
		late:  !t.exists() || (o.typ == "dir" && t.typ != "dir"),
	}
}

// lineMerge merges text file p line by line (a binary one conflicts).
func (m *merger) lineMerge(p string, b, o, t node) (plan, error) {
	return m.lineMergeAt(p, [3]string{p, p, p}, b, o, t, "both sides changed it; a clean line merge")
}

// lineMergeAt merges base, ours and theirs versions read from src (a
// rename puts a side's version at another path) into dst in ours.
func (m *merger) lineMergeAt(dst string, src [3]string, b, o, t node, clean string) (plan, error) {
	var data [3][]byte
	for i, tr := range []*tree{m.base, m.ours, m.theirs} {
		d, err := tr.read(src[i])
		if err != nil {
			return plan{}, err
		}
		if !linemerge.IsText(d) {
			return m.conflict(dst, b, o, t, "a binary file changed on both sides")
		}
		data[i] = d
	}
	style := map[Strategy]linemerge.Style{ThreeWay: linemerge.Markers, Ours: linemerge.Ours,
		Theirs: linemerge.Theirs, Union: linemerge.Union}[m.strategy]
	res := linemerge.Merge(data[0], data[1], data[2], style)
	n := o // our owner; their mode if only they changed it
	if o.mode == b.mode || !b.exists() && m.strategy == Theirs {
		n.mode = t.mode
	}
	e := Entry{Path: dst, Outcome: Merged, Reason: clean}
	if res.Conflicts > 0 {
		e = Entry{Path: dst, Outcome: Conflict, Resolution: string(m.strategy),
			Reason: "both sides changed the same lines"}
		if m.strategy == ThreeWay {
			e.Resolution = "markers"
		}
	}
	merged := res.Data
	if merged == nil {
		merged = []byte{}
	}
	return plan{entry: e, act: func() error { return m.ours.writeFile(dst, n, merged, nil) }}, nil
}

// conflict plans a conflict that no line merge settles: the strategy picks
// a side, or (three-way) ours is kept and the conflict reported.
func (m *merger) conflict(p string, b, o, t node, reason string) (plan, error) {
	kept := plan{entry: Entry{Path: p, Outcome: Conflict, Resolution: "kept-ours", Reason: reason}}
	switch {
	case m.strategy == Ours:
		kept.entry.Resolution = "ours"
	case t.typ == "other":
	case m.strategy == Theirs, m.strategy == Union && !o.exists():
		pl := m.take(p, o, t, reason)
		pl.entry.Outcome, pl.entry.Resolution = Conflict, string(m.strategy)
		return pl, nil
	case m.strategy == Union:
		kept.entry.Resolution = "union"
	}
	return kept, nil
}

func conflictReason(b, o, t node) string {
	switch {
	case !o.exists() || !t.exists():
		return "deleted on one side and changed on the other"
	case o.typ != t.typ:
		return "its type (" + o.typ + " here, " + t.typ + " there) differs"
	case o.typ == "file":
		return "a binary or large file changed on both sides"
	case o.typ == "symlink":
		return "a symlink changed on both sides"
	}
	return "changed on both sides"
}

// apply runs the plans (unless a dry run) and returns their entries. A
// write whose directory our side removed (a conflict kept ours) becomes a
// conflict itself rather than an error.
func (m *merger) apply(ctx context.Context, plans []plan) ([]Entry, error) {
	out := make([]Entry, len(plans))
	for i, pl := range plans {
		out[i] = pl.entry
	}
	if m.dryRun {
		return out, nil
	}
	var errs []error
	run := func(i int) {
		err := plans[i].act()
		switch {
		case err == nil:
		case errors.Is(err, unix.ENOENT) && plans[i].entry.Outcome != Conflict:
			out[i].Outcome, out[i].Resolution = Conflict, "kept-ours"
			out[i].Reason = "its directory is gone on our side"
		default:
			errs = append(errs, err)
		}
	}
	order := make([]int, len(plans))
	for i := range order {
		order[i] = i
	}
	for _, i := range order {
		if plans[i].act != nil && !plans[i].late {
			run(i)
		}
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(plans[b].entry.Path, plans[a].entry.Path) })
	for _, i := range order {
		if plans[i].act != nil && plans[i].late {
			run(i)
		}
	}
	return out, errors.Join(errs...)
}
