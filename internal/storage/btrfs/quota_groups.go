package btrfs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
	"github.com/warrenhq/warren/internal/storage"
)

var _ storage.QuotaGroups = (*Storage)(nil)

// quotaGroups keeps the table of quota groups (quota_table.go) and their
// qgroups.
type quotaGroups struct {
	root string // the pool's qgroup ioctls go through it, and the table's lock is on it
	// tableDir holds the table: outside the pool when the pool is an
	// image of warren's own, so that a full pool cannot keep the daemon
	// from recording a group (issue 31); else root.
	tableDir string
	log      *slog.Logger
	// reclaimed is called after the space of deleted volumes was hurried
	// out of a quota group (tests count it).
	reclaimed func()
	// commits batches the table's writes (quota_commit.go).
	commits tableCommits
}

// How quota groups work on simple quotas (measured on 6.18):
//
// Simple quotas charge every extent to the subvolume that wrote it, for as
// long as the extent exists, and to the level-1 qgroups that subvolume's
// qgroup 0/id belongs to. A group is one qgroup 1/N; each volume snapshotted
// into it (the sandbox's live volume, its snapshots, a rollback) joins it at
// creation. So:
//   - a snapshot adds only its root node (16 KiB): nothing is counted twice;
//   - after a rollback (delete the live volume, snapshot an old snapshot
//     into the group) the group holds what its snapshots still reference
//     plus what the new volume writes: the dropped volume's own extents
//     leave the count as the kernel reclaims them (in the background);
//   - a fork (a snapshot into a new group) starts at 16 KiB: the data it
//     shares stays charged to the group that wrote it.
//
// With simple quotas "referenced" and "exclusive" are the same number (the
// kernel adds each delta to both), so max_rfer and max_excl behave the
// same; the group is capped with max_excl, which names the intent ("bytes
// this sandbox wrote itself") and is the one that would not charge a fork
// for its parent's data should the accounting ever be classic qgroups.
// A write past the cap fails with EDQUOT in the writer (write(2), or
// open(2) with O_CREAT once the group is full); other groups are untouched.

// SetGroupLimit implements storage.QuotaGroups.
func (g *quotaGroups) SetGroupLimit(ctx context.Context, group string, bytes int64) error {
	if err := ids.ValidateName("quota group", group); err != nil {
		return err
	}
	if bytes < 0 {
		return fmt.Errorf("quota group %s: limit %d is negative (0 means no limit): %w", group, bytes, errdefs.ErrInvalid)
	}
	// A new group's entry is written with those of the creates and
	// deletes at the same time (quota_commit.go).
	err := g.update(func(t *groupTable) (bool, func(), error) {
		q, added, err := t.ensureUnsaved(group)
		if err != nil {
			return false, nil, err
		}
		var undo func()
		if added {
			undo = func() {
				if err := t.unmake(group); err != nil {
					g.log.Warn("remove the qgroup of a quota group whose entry was not saved", "group", group, "err", err)
				}
			}
		}
		if err := qgroupSetMaxExcl(t.fd(), q, uint64(bytes)); err != nil {
			return added, undo, fmt.Errorf("qgroup %s to %d bytes: %w", qgroupString(q), bytes, errnoKind(err))
		}
		return added, undo, nil
	})
	if err != nil {
		return fmt.Errorf("set limit of quota group %s: %w", group, err)
	}
	return nil
}

// GroupUsage implements storage.QuotaGroups. The numbers are the kernel's
// in-memory counters: data still in the page cache is counted once it is
// written out (at the latest at the next commit, 30 s by default).
func (g *quotaGroups) GroupUsage(ctx context.Context, group string) (used, limit int64, err error) {
	if err := ids.ValidateName("quota group", group); err != nil {
		return 0, 0, err
	}
	t, err := g.openGroupTable()
	if err != nil {
		return 0, 0, fmt.Errorf("usage of quota group %s: %w", group, err)
	}
	defer t.close()
	q, ok := t.lookup(group)
	if !ok {
		return 0, 0, fmt.Errorf("quota group %s: %w", group, errdefs.ErrNotFound)
	}
	used, limit, err = t.usage(q)
	if err != nil {
		return 0, 0, fmt.Errorf("usage of quota group %s: %w", group, err)
	}
	return used, limit, nil
}

// DeleteGroup implements storage.QuotaGroups.
//
// Members whose subvolume is gone are detached first: a deleted volume's
// qgroup outlives it while a fork or a snapshot in another group still
// shares its extents, and the kernel refuses to destroy a qgroup that has
// members. A member whose subvolume still exists is an ErrConflict.
func (g *quotaGroups) DeleteGroup(ctx context.Context, group string) error {
	if err := ids.ValidateName("quota group", group); err != nil {
		return err
	}
	// The entry's removal is written with the changes of the creates and
	// deletes at the same time (quota_commit.go).
	err := g.update(func(t *groupTable) (bool, func(), error) {
		n, ok := t.groups[group]
		if !ok {
			return false, nil, nil
		}
		if err := t.destroyGroup(group, n); err != nil {
			return false, nil, err
		}
		delete(t.groups, group)
		return true, nil, nil
	})
	if errors.Is(err, errNoSimpleQuotas) {
		return nil // no quotas, so no group was ever made
	}
	return err
}

// destroyGroup removes qgroup 1/n of group, if it still exists.
func (t *groupTable) destroyGroup(group string, n uint64) error {
	q := qgroupID(1, n)
	if !t.qgroupExists(n) {
		return nil
	}
	if err := t.detachStaleMembers(group, q); err != nil {
		return err
	}
	err := qgroupCreate(t.fd(), q, false)
	if errors.Is(err, unix.EBUSY) {
		return fmt.Errorf("delete quota group %s (qgroup %s): the kernel says it still has members: %w: %w", group, qgroupString(q), errdefs.ErrConflict, err)
	}
	if err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("delete quota group %s (qgroup %s): %w", group, qgroupString(q), errnoKind(err))
	}
	return nil
}

// detachStaleMembers removes from q the qgroups of deleted subvolumes, and
// fails with ErrConflict if a live subvolume is still a member.
func (t *groupTable) detachStaleMembers(group string, q uint64) error {
	related, err := searchOffsets(t.fd(), quotaTreeObjectID, q, qgroupRelationKey)
	if err != nil {
		return fmt.Errorf("delete quota group %s: list its members: %w", group, errnoKind(err))
	}
	var stale []uint64
	for _, m := range related {
		if m>>48 != 0 {
			continue // the groups' parent (quota_cap.go)
		}
		backrefs, err := searchOffsets(t.fd(), rootTreeObjectID, m, rootBackrefKey)
		if err != nil {
			return fmt.Errorf("delete quota group %s: look up subvolume %d: %w", group, m, errnoKind(err))
		}
		if len(backrefs) > 0 {
			return fmt.Errorf("delete quota group %s: subvolume %d is still in it; delete the group's volumes first: %w", group, m, errdefs.ErrConflict)
		}
		stale = append(stale, m)
	}
	for _, m := range stale {
		if err := qgroupUnassign(t.fd(), m, q); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("delete quota group %s: detach qgroup 0/%d of a deleted volume: %w", group, m, errnoKind(err))
		}
	}
	return nil
}

// snapshotGroup returns the qgroup a snapshot joins (0: none), creating the
// group if missing, and a function that deletes the group again if this
// call created it (for when the snapshot then fails). With reclaim, the
// space of the group's deleted volumes is hurried out of it first (see
// reclaimDeleted): for a volume that will take writes, not for a read-only
// one, which adds nothing to the group and must not pay a commit (a turn
// snapshot is made with its sandbox frozen). On a filesystem without simple
// quotas the group is ignored, as on backends without QuotaGroups;
// SetGroupLimit is what tells the caller that limits cannot be had.
func (g *quotaGroups) snapshotGroup(group string, reclaim bool) (qgroup uint64, undo func(), err error) {
	undo = func() {}
	if group == "" {
		return 0, undo, nil
	}
	if err := ids.ValidateName("quota group", group); err != nil {
		return 0, undo, err
	}
	t, err := g.openGroupTable()
	if errors.Is(err, errNoSimpleQuotas) {
		g.log.Debug("no simple quotas: volume not charged to a quota group", "group", group)
		return 0, undo, nil
	}
	if err != nil {
		return 0, undo, fmt.Errorf("quota group %s: %w", group, err)
	}
	defer t.close()
	_, existed := t.groups[group]
	if qgroup, err = t.ensure(group); err != nil {
		return 0, undo, err
	}
	if existed && reclaim {
		// Likely a rollback, right after the live volume was deleted.
		if err := reclaimDeleted(t.fd()); err != nil {
			g.log.Warn("could not hurry the reclaim of deleted volumes; their space leaves the quota group within the commit interval", "err", err)
		}
		if g.reclaimed != nil {
			g.reclaimed()
		}
	}
	if !existed {
		undo = func() {
			if err := g.DeleteGroup(context.Background(), group); err != nil {
				g.log.Warn("could not remove the quota group made for a failed snapshot", "group", group, "err", err)
			}
		}
	}
	return qgroup, undo, nil
}

func qgroupString(q uint64) string { return fmt.Sprintf("%d/%d", q>>48, q&(1<<48-1)) }
