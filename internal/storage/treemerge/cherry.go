package treemerge

import (
	"context"
	"path"
	"slices"
)

// CherryPick makes paths (cleaned by CheckPaths) in ours what they are in
// theirs, with everything below them: copied, or removed where theirs has
// nothing. Every path that differed is listed, taken.
func CherryPick(ctx context.Context, ours, theirs string, paths []string, dryRun bool) ([]Entry, error) {
	m, err := open("", ours, theirs)
	if err != nil {
		return nil, err
	}
	defer m.close()
	m.dryRun = dryRun
	var all []string
	for _, p := range paths {
		for _, t := range []*tree{m.theirs, m.ours} {
			if err := t.walk(ctx, p, &all); err != nil {
				return nil, err
			}
		}
	}
	slices.Sort(all)
	all = slices.Compact(all)
	var plans []plan
	for _, p := range all {
		o, err := m.ours.stat(p)
		if err != nil {
			return nil, err
		}
		t, err := m.theirs.stat(p)
		if err != nil {
			return nil, err
		}
		if same, err := sameContent(m.ours, m.theirs, p, o, t); err != nil || same {
			if err != nil {
				return nil, err
			}
			continue
		}
		if t.typ == "other" {
			plans = append(plans, plan{entry: Entry{Path: p, Outcome: Conflict, Resolution: "kept-ours",
				Reason: "a device, fifo or socket there, which a merge does not copy"}})
			continue
		}
		plans = append(plans, m.take(p, o, t, "picked from their side"))
	}
	return m.apply(ctx, plans)
}

// walk appends p and, if it is a directory, every path below it.
func (t *tree) walk(ctx context.Context, p string, out *[]string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	n, err := t.stat(p)
	if err != nil || !n.exists() {
		return err
	}
	*out = append(*out, p)
	if n.typ != "dir" {
		return nil
	}
	names, err := t.entries(p)
	if err != nil {
		return err
	}
	for _, name := range names {
		if err := t.walk(ctx, path.Join(p, name), out); err != nil {
			return err
		}
	}
	return nil
}
