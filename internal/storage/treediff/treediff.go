// Package treediff lists the differences between two directory trees (two
// volumes) by comparing what lstat says about each path.
//
// Walk compares whole trees. A backend that knows which paths can have
// changed (btrfs, from its transaction ids) uses a Comparer to look at those
// paths alone and gets the same answer in a fraction of the time.
//
// # What counts as a change
//
// A path present in one tree only is added or removed; a removed or added
// directory is listed with every path below it. A path whose type differs
// (a file that became a directory) is removed and added. A path of the same
// type is modified when its metadata tuple differs:
//
//   - always: permission bits (with setuid/setgid/sticky), uid, gid, mtime
//     (to the nanosecond), the size of files and symlinks, the target of
//     symlinks, the device number of device nodes;
//   - with Options.SameInodes, also the inode number and ctime.
//
// File contents are never read: a rewrite shows up as a new mtime (and, on
// btrfs, a new ctime), which is how every tool that snapshots trees decides.
// A directory's size is not compared (it is filesystem bookkeeping, not
// content) and is reported as 0. A directory whose entries changed has a
// new mtime, so it is listed as modified beside its added or removed entries.
//
// Entries on another device than their tree's root (mount points, nested
// btrfs subvolumes and the empty placeholders snapshots keep for them) are
// not part of the volume: they are neither listed nor entered. Symlinks are
// never followed and nothing outside the two roots is ever looked at.
package treediff

import (
	"context"

	"github.com/warrenhq/warren/internal/storage"
)

// Options tunes a comparison.
type Options struct {
	// SameInodes says both trees come from one lineage of btrfs snapshots,
	// where an untouched file keeps its inode number, ctime and mtime: the
	// inode number and ctime are then compared too, which catches changes
	// that restored an old mtime (touch -d, tar x). Leave it false for
	// copies (the dir backend), where inode numbers and ctimes differ for
	// every file.
	SameInodes bool
}

// Walk compares the trees rooted at fromRoot and toRoot and returns their
// differences sorted by path (see storage.Change). It stops early with
// ctx's error when ctx is cancelled.
func Walk(ctx context.Context, fromRoot, toRoot string, opts Options) ([]storage.Change, error) {
	c, err := NewComparer(fromRoot, toRoot, opts)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if err := c.Tree(ctx, "/"); err != nil {
		return nil, err
	}
	return c.Changes(), nil
}
