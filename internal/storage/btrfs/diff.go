package btrfs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/storage"
	"github.com/warrenhq/warren/internal/storage/treediff"
)

var _ storage.Differ = (*Storage)(nil)

// differ lists what changed between two volumes.
type differ struct {
	vols *volumes
	log  *slog.Logger
}

// diffMethod says how a diff was computed (for logs and tests).
type diffMethod string

const (
	diffSame       diffMethod = "same-volume"
	diffFast       diffMethod = "transid"     // only what changed since a common transaction
	diffWalkInodes diffMethod = "walk-inodes" // whole walk, one lineage (inode numbers comparable)
	diffWalk       diffMethod = "walk"        // whole walk, unrelated volumes
)

// Diff implements storage.Differ.
//
// When `to` descends from the state `from` captured (see planDiff), only
// the inodes btrfs wrote since then are looked at: a turn that touched 25
// files of a 100,000-file tree costs a few milliseconds. Otherwise it walks
// both trees. Both give the same answer (treediff's rule with SameInodes
// whenever the volumes share a lineage). A writable volume is diffed as it
// was when Diff synced the filesystem; writes racing with Diff may or may
// not show.
func (df *differ) Diff(ctx context.Context, from, to storage.Key) ([]storage.Change, error) {
	start := time.Now()
	changes, method, err := df.diff(ctx, from, to, false)
	if err != nil {
		return nil, err
	}
	df.log.Debug("diffed volumes", "from", from, "to", to, "method", method, "changes", len(changes), "took", time.Since(start))
	return changes, nil
}

// diff computes the diff; walkOnly skips the fast path (for tests and the
// benchmark, which compare the two).
func (df *differ) diff(ctx context.Context, from, to storage.Key, walkOnly bool) ([]storage.Change, diffMethod, error) {
	if err := from.Validate(); err != nil {
		return nil, "", err
	}
	if err := to.Validate(); err != nil {
		return nil, "", err
	}
	ff, err := df.vols.openSubvol(from)
	if err != nil {
		return nil, "", fmt.Errorf("diff %s: %w", from, err)
	}
	defer ff.Close()
	tf, err := df.vols.openSubvol(to)
	if err != nil {
		return nil, "", fmt.Errorf("diff %s: %w", to, err)
	}
	defer tf.Close()
	fromFd, toFd := int(ff.Fd()), int(tf.Fd())

	fi, err1 := getSubvolInfo(fromFd)
	ti, err2 := getSubvolInfo(toFd)
	if err := errors.Join(err1, err2); err != nil {
		// A kernel without the ioctl (before 4.18): walk, not knowing
		// whether the inode numbers are comparable.
		df.log.Debug("cannot read subvolume info; walking", "err", err)
		ch, err := treediff.Walk(ctx, df.vols.Path(from), df.vols.Path(to), treediff.Options{})
		return ch, diffWalk, err
	}
	if fi.uuid == ti.uuid {
		return []storage.Change{}, diffSame, nil
	}
	plan := planDiff(toFd, fi, ti)
	if plan.fast && !walkOnly {
		ch, ok, err := df.fastDiff(ctx, fromFd, toFd, from, to, fi, ti, plan.threshold)
		if err != nil {
			return nil, "", err
		}
		if ok {
			return ch, diffFast, nil
		}
	}
	method := diffWalk
	if plan.related {
		method = diffWalkInodes
	}
	ch, err := treediff.Walk(ctx, df.vols.Path(from), df.vols.Path(to), treediff.Options{SameInodes: plan.related})
	return ch, method, err
}

// fastDiff compares only the paths of inodes written after threshold in
// `to`. ok is false when it cannot vouch for its answer (from changed
// since threshold, an ioctl is refused, an inode has more names than the
// kernel returns at once): the caller then walks.
func (df *differ) fastDiff(ctx context.Context, fromFd, toFd int, from, to storage.Key, fi, ti diffSubvol, threshold uint64) (changes []storage.Change, ok bool, err error) {
	// Inode items of a writable volume may still sit in btrfs's delayed
	// items, invisible to a tree search, until the transaction commits.
	if !fi.readOnly || !ti.readOnly {
		if err := unix.Syncfs(toFd); err != nil {
			return nil, false, fmt.Errorf("diff %s: sync the pool: %w", to, err)
		}
	}
	// The rule below holds only if `from` still is what it was at
	// threshold: no inode of it may have been written since.
	fromChanged := false
	if err := scanChangedInodes(fromFd, threshold, func(uint64, bool) bool {
		fromChanged = true
		return false
	}); err != nil {
		df.log.Debug("tree search refused; walking", "volume", from, "err", err)
		return nil, false, nil
	}
	if fromChanged {
		df.log.Debug("source volume changed since the common transaction; walking", "volume", from, "transid", threshold)
		return nil, false, nil
	}

	type cand struct {
		ino   uint64
		isDir bool
	}
	var cands []cand
	if err := scanChangedInodes(toFd, threshold, func(ino uint64, isDir bool) bool {
		cands = append(cands, cand{ino, isDir})
		return true
	}); err != nil {
		df.log.Debug("tree search refused; walking", "volume", to, "err", err)
		return nil, false, nil
	}

	var paths []treePath
	buf := make([]byte, inoPathsBufSize)
	for _, c := range cands {
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
		if c.ino == firstFreeObjectID {
			paths = append(paths, treePath{"/", c.isDir})
			continue
		}
		ps, complete, err := inodePaths(toFd, c.ino, buf)
		if errors.Is(err, unix.ENOENT) {
			continue // unlinked, still open somewhere: it has no path
		}
		if err != nil || !complete {
			df.log.Debug("cannot resolve inode paths; walking", "volume", to, "inode", c.ino, "err", err)
			return nil, false, nil
		}
		for _, p := range ps {
			paths = append(paths, treePath{"/" + p, c.isDir})
		}
	}

	changes, err = comparePaths(ctx, df.vols.Path(from), df.vols.Path(to), paths)
	if err != nil {
		return nil, false, err
	}
	return changes, true, nil
}

// scanChangedInodes calls fn for every inode of the subvolume open at fd
// whose inode item was written after transaction threshold. Every change
// the diff reports (content, metadata, a directory's entries, a new name
// for a file) rewrites the inode item and stamps it with the transaction.
func scanChangedInodes(fd int, threshold uint64, fn func(ino uint64, isDir bool) bool) error {
	return treeSearchV2(fd, 0, firstFreeObjectID, 0, ^uint64(0), 255, threshold+1, func(it treeItem) bool {
		if it.typ != keyInodeItem || len(it.data) < inodeItemLen {
			return true
		}
		transid := leUint64(it.data[inodeTransidOff:])
		if transid <= threshold {
			return true // in a rewritten leaf, but not itself rewritten
		}
		mode := leUint32(it.data[inodeModeOff:])
		return fn(it.objectid, mode&unix.S_IFMT == unix.S_IFDIR)
	})
}
