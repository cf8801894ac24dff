package btrfs

import (
	"context"
	"sort"

	"github.com/warrenhq/warren/internal/storage"
	"github.com/warrenhq/warren/internal/storage/treediff"
)

// treePath is one path of a changed inode of `to`.
type treePath struct {
	path  string
	isDir bool
}

// comparePaths compares the given paths of `to` (and the entries of the
// directories among them) with `from`. Parents come before their children
// (sorted), so a subtree the comparer has already walked whole is skipped.
func comparePaths(ctx context.Context, fromRoot, toRoot string, paths []treePath) ([]storage.Change, error) {
	sort.Slice(paths, func(i, j int) bool { return paths[i].path < paths[j].path })
	c, err := treediff.NewComparer(fromRoot, toRoot, treediff.Options{SameInodes: true})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	for i, p := range paths {
		if i > 0 && p.path == paths[i-1].path {
			continue
		}
		if c.Covered(p.path) {
			continue
		}
		if err := c.Path(ctx, p.path); err != nil {
			return nil, err
		}
		if p.isDir {
			if err := c.Children(ctx, p.path); err != nil {
				return nil, err
			}
		}
	}
	return c.Changes(), nil
}
