// Package treemerge merges the changes one tree (theirs) made since a
// common ancestor (base) into another (ours), on the host, file by file:
// a path only theirs changed takes theirs; a path both changed the same
// way is kept; a text file both changed gets a line-level three-way merge
// (linemerge); anything else both changed (binary files, type changes,
// deletion against modification, symlinks) is a conflict, resolved by the
// strategy or reported. CherryPick copies chosen paths as they are.
//
// Every lookup resolves inside its tree (openat2 RESOLVE_IN_ROOT), and
// symlinks are copied as symlinks, never followed: a merge cannot read or
// write outside the three trees whatever the sandboxes put in them.
package treemerge

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/storage"
)

// Strategy says how a conflict is resolved.
type Strategy string

const (
	ThreeWay Strategy = "three-way" // conflict markers in text files; ours kept otherwise
	Ours     Strategy = "ours"      // our side wins
	Theirs   Strategy = "theirs"    // their side wins
	Union    Strategy = "union"     // both sides' lines; what exists wins over a deletion
)

// ParseStrategy checks a strategy's name ("" is ThreeWay).
func ParseStrategy(s string) (Strategy, error) {
	switch Strategy(s) {
	case "":
		return ThreeWay, nil
	case ThreeWay, Ours, Theirs, Union:
		return Strategy(s), nil
	}
	return "", fmt.Errorf("unknown merge strategy %q: want three-way, ours, theirs or union: %w", s, errdefs.ErrInvalid)
}

// Outcome is what a merge did with a path.
type Outcome string

const (
	Taken    Outcome = "taken"    // one side's version (theirs, or ours when both are the same)
	Merged   Outcome = "merged"   // a clean line merge of both sides
	Conflict Outcome = "conflict" // both sides changed it incompatibly
)

// Entry is one path of a merge's answer.
type Entry struct {
	Path    string  `json:"path"`
	Outcome Outcome `json:"outcome"`
	// Resolution says how a conflict was settled: markers (written into
	// the file), ours, theirs, union, or kept-ours (reported, our version
	// left in place).
	Resolution string `json:"resolution,omitempty"`
	// Reason says what happened, for people.
	Reason string `json:"reason,omitempty"`
}

// Request is a three-way merge.
type Request struct {
	// Base, Ours and Theirs are the trees' directories on the host. Ours
	// is written to (unless DryRun).
	Base, Ours, Theirs string
	// OursChanges and TheirsChanges are each side's changes since Base
	// (storage.Differ).
	OursChanges, TheirsChanges []storage.Change
	// Paths limits the merge to these paths and what is below them.
	Paths    []string
	Strategy Strategy
	DryRun   bool
}

// maxLineMerge is the largest file merged line by line; larger ones are
// treated as binary.
const maxLineMerge = 8 << 20

// CheckPaths validates merge paths: relative or absolute inside the tree,
// without "..". It returns them cleaned and absolute.
func CheckPaths(paths []string) ([]string, error) {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		if p == "" || strings.ContainsRune(p, 0) || slices.Contains(strings.Split(p, "/"), "..") {
			return nil, fmt.Errorf("path %q: want a path inside the sandbox without '..': %w", p, errdefs.ErrInvalid)
		}
		c := path.Clean("/" + p)
		if c == "/" {
			return nil, fmt.Errorf("path %q names the whole tree: leave paths out to merge everything: %w", p, errdefs.ErrInvalid)
		}
		out = append(out, c)
	}
	return out, nil
}

// Merge merges req.Theirs's changes into req.Ours and lists every path
// theirs changed with its outcome.
func Merge(ctx context.Context, req Request) ([]Entry, error) {
	m, err := open(req.Base, req.Ours, req.Theirs)
	if err != nil {
		return nil, err
	}
	defer m.close()
	m.strategy, m.dryRun = req.Strategy, req.DryRun
	oursChanged := map[string]bool{}
	for _, c := range req.OursChanges {
		oursChanged[c.Path] = true
	}
	var ps []string
	for _, c := range req.TheirsChanges {
		if c.Path != "/" && under(c.Path, req.Paths) && (len(ps) == 0 || ps[len(ps)-1] != c.Path) {
			ps = append(ps, c.Path)
		}
	}
	if err := m.detectRenames(req, oursChanged); err != nil {
		return nil, err
	}
	var plans []plan
	for _, p := range ps {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		pl, err := m.decide(p, oursChanged[p])
		if err != nil {
			return nil, err
		}
		if pl.entry.Path != "" {
			plans = append(plans, pl)
		}
	}
	return m.apply(ctx, plans)
}

// detectRenames finds the renames of files the other side edited.
func (m *merger) detectRenames(req Request, oursChanged map[string]bool) error {
	theirsChanged := map[string]bool{}
	for _, c := range req.TheirsChanges {
		theirsChanged[c.Path] = true
	}
	var err error
	if m.oursRenamed, err = m.findRenames(m.ours, req.OursChanges, theirsChanged); err != nil {
		return err
	}
	if m.theirsRenamed, err = m.findRenames(m.theirs, req.TheirsChanges, oursChanged); err != nil {
		return err
	}
	m.theirsRenamedTo = map[string]string{}
	for from, to := range m.theirsRenamed {
		m.theirsRenamedTo[to] = from
	}
	return nil
}

// under says whether p is one of paths or below one (any p when paths is
// empty).
func under(p string, paths []string) bool {
	if len(paths) == 0 {
		return true
	}
	for _, q := range paths {
		if p == q || strings.HasPrefix(p, q+"/") {
			return true
		}
	}
	return false
}
