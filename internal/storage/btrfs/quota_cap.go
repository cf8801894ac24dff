package btrfs

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
	"github.com/warrenhq/warren/internal/storage"
)

var _ storage.GroupsCap = (*Storage)(nil)

// The groups' cap is one level-2 qgroup, 2/P, that every group's qgroup
// 1/N is a member of. Simple quotas charge an extent to its subvolume's
// qgroup and to every qgroup above it, and a write is refused (EDQUOT)
// when any of them would pass its limit: so with 2/P capped, the groups
// together can never hold more than the cap, whatever each one's own
// limit. Volumes outside every group (templates, the pool's own files)
// are not under it: they are what the cap keeps room for.
//
// A new group is not under the cap until JoinGroupsCap (or the next
// SetGroupsCap, which puts every group under it): a sandbox's start writes
// into its new volume (the agent's mount points), and with the sandboxes'
// share used up that start would fail, though the daemon's own work is
// what the reserve is for. Joined, the group's bytes so far count (the
// kernel adds them to the parent's count), and its later writes are
// capped. P is kept in the group table beside the groups.

// SetGroupsCap implements storage.GroupsCap.
func (g *quotaGroups) SetGroupsCap(ctx context.Context, bytes int64) error {
	if bytes < 0 {
		return fmt.Errorf("cap of all quota groups: %d is negative (0 means no cap): %w", bytes, errdefs.ErrInvalid)
	}
	t, err := g.openGroupTable()
	if err != nil {
		return fmt.Errorf("cap all quota groups: %w", err)
	}
	defer t.close()
	p, err := t.ensureParent()
	if err != nil {
		return err
	}
	if err := t.joinAll(); err != nil {
		return err
	}
	if err := qgroupSetMaxExcl(t.fd(), p, uint64(bytes)); err != nil {
		return fmt.Errorf("cap all quota groups (qgroup %s) at %d bytes: %w", qgroupString(p), bytes, errnoKind(err))
	}
	return nil
}

// GroupsUsage implements storage.GroupsCap. Before the first SetGroupsCap
// there is no parent: nothing is reported as charged and there is no cap.
func (g *quotaGroups) GroupsUsage(ctx context.Context) (used, limit int64, err error) {
	t, err := g.openGroupTable()
	if err != nil {
		return 0, 0, fmt.Errorf("usage of all quota groups: %w", err)
	}
	defer t.close()
	if t.parent == 0 || !t.exists(2, t.parent) {
		return 0, 0, nil
	}
	used, limit, err = t.usage(qgroupID(2, t.parent))
	if err != nil {
		return 0, 0, fmt.Errorf("usage of all quota groups: %w", err)
	}
	return used, limit, nil
}

// Space implements storage.GroupsCap with statfs: the pool's size, and
// what btrfs says is still free for data.
func (v *volumes) Space(ctx context.Context) (size, avail int64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(v.root, &st); err != nil {
		return 0, 0, fmt.Errorf("statfs %s: %w", v.root, errnoKind(err))
	}
	return int64(st.Blocks) * st.Bsize, int64(st.Bavail) * st.Bsize, nil
}

// ensureParent returns the groups' parent qgroup, making it if it is
// missing.
func (t *groupTable) ensureParent() (uint64, error) {
	if t.parent != 0 && t.exists(2, t.parent) {
		return qgroupID(2, t.parent), nil
	}
	if t.parent == 0 {
		n, err := t.create(2)
		if err != nil {
			return 0, fmt.Errorf("make the parent of all quota groups: %w", err)
		}
		t.parent = n
	} else if err := qgroupCreate(t.fd(), qgroupID(2, t.parent), true); err != nil && !errors.Is(err, unix.EEXIST) {
		return 0, fmt.Errorf("recreate qgroup 2/%d, the parent of all quota groups: %w", t.parent, errnoKind(err))
	}
	if err := t.save(); err != nil {
		return 0, err
	}
	return qgroupID(2, t.parent), nil
}

// JoinGroupsCap implements storage.GroupsCap.
func (g *quotaGroups) JoinGroupsCap(ctx context.Context, group string) error {
	if err := ids.ValidateName("quota group", group); err != nil {
		return err
	}
	t, err := g.openGroupTable()
	if err != nil {
		return fmt.Errorf("put quota group %s under the cap: %w", group, err)
	}
	defer t.close()
	n, ok := t.groups[group]
	if !ok || !t.qgroupExists(n) {
		return fmt.Errorf("quota group %s: %w", group, errdefs.ErrNotFound)
	}
	if err := t.joinParent(n); err != nil {
		return fmt.Errorf("quota group %s: %w", group, err)
	}
	return nil
}

// joinAll puts every group that is not yet under the parent under it.
func (t *groupTable) joinAll() error {
	members, err := searchOffsets(t.fd(), quotaTreeObjectID, qgroupID(2, t.parent), qgroupRelationKey)
	if err != nil {
		return fmt.Errorf("list the members of qgroup 2/%d: %w", t.parent, errnoKind(err))
	}
	in := map[uint64]bool{}
	for _, m := range members {
		in[m] = true
	}
	for name, n := range t.groups {
		if in[qgroupID(1, n)] || !t.qgroupExists(n) {
			continue
		}
		if err := t.joinParent(n); err != nil {
			return fmt.Errorf("quota group %s: %w", name, err)
		}
	}
	return nil
}

// joinParent makes qgroup 1/n a member of the groups' parent, if there is
// one.
func (t *groupTable) joinParent(n uint64) error {
	if t.parent == 0 || !t.exists(2, t.parent) {
		return nil
	}
	err := qgroupAssign(t.fd(), qgroupID(1, n), qgroupID(2, t.parent))
	if err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("make qgroup 1/%d a member of 2/%d: %w", n, t.parent, errnoKind(err))
	}
	return nil
}
