package treemerge

import (
	"bytes"

	"github.com/warrenhq/warren/internal/storage"
)

// maxRenameChecks bounds the content comparisons rename detection makes:
// past it, renames are merged as a deletion and an addition.
const maxRenameChecks = 4096

// findRenames finds the files a side renamed without changing them: a
// regular file the side removed whose base content is that of a file it
// added (in side's tree). wanted limits the old paths looked at.
func (m *merger) findRenames(side *tree, changes []storage.Change, wanted map[string]bool) (map[string]string, error) {
	added := map[int64][]string{}
	for _, c := range changes {
		if c.Kind == storage.ChangeAdded && c.Type == "file" {
			added[c.Size] = append(added[c.Size], c.Path)
		}
	}
	out := map[string]string{}
	checks := 0
	for _, c := range changes {
		// Only files a line merge can take are worth finding: the edit
		// of a larger one conflicts anyway.
		if c.Kind != storage.ChangeRemoved || c.Type != "file" || !wanted[c.Path] || len(added[c.OldSize]) == 0 || c.OldSize > maxLineMerge {
			continue
		}
		old, err := m.base.read(c.Path)
		if err != nil {
			return nil, err
		}
		for _, q := range added[c.OldSize] {
			if checks++; checks > maxRenameChecks {
				return out, nil
			}
			d, err := side.read(q)
			if err != nil {
				return nil, err
			}
			if bytes.Equal(old, d) {
				out[c.Path] = q
				break
			}
		}
	}
	return out, nil
}

// renamed settles path p when one side renamed it and the other edited
// it: the edit is merged into the file at its new path. ok is false when p
// is no such case.
func (m *merger) renamed(p string, b, o, t node, oursChanged bool) (pl plan, ok bool, err error) {
	if q, ok := m.oursRenamed[p]; ok && t.typ == "file" && b.typ == "file" {
		// Ours moved p to q, theirs edited p: merge their edit into q.
		qo, err := m.ours.stat(q)
		if err != nil || qo.typ != "file" {
			return plan{}, false, err
		}
		pl, err := m.lineMergeAt(q, [3]string{p, q, p}, b, qo, t, "renamed to "+q+" on our side; their edit merged there")
		return pl, true, err
	}
	if from, ok := m.theirsRenamedTo[p]; ok {
		// Theirs moved `from` to p; ours edited `from`: merge our edit
		// into p, and `from` goes.
		bf, err := m.base.stat(from)
		if err != nil {
			return plan{}, false, err
		}
		of, err := m.ours.stat(from)
		if err != nil || of.typ != "file" || bf.typ != "file" {
			return plan{}, false, err
		}
		pl, err := m.lineMergeAt(p, [3]string{from, from, p}, bf, of, t, "renamed from "+from+" on their side; our edit merged here")
		if err == nil && pl.act != nil {
			write := pl.act
			pl.act = func() error {
				if err := write(); err != nil {
					return err
				}
				return m.ours.remove(from)
			}
		}
		return pl, true, err
	}
	if _, ok := m.theirsRenamed[p]; ok && oursChanged {
		return plan{entry: Entry{Path: p, Outcome: Merged, Reason: "renamed to " + m.theirsRenamed[p] + " on their side, with our edit"}}, true, nil
	}
	return plan{}, false, nil
}
