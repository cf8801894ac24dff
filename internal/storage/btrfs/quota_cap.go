package btrfs

import (
	"context"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/errdefs"
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
// P is kept in the group table beside the groups. A group joins 2/P when
// it is made (still empty, so nothing needs moving); groups made before
// the parent existed join when it is made, and the kernel adds what they
// hold to the parent's count.

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

// ensureParent returns the groups' parent qgroup, making it (and making
// every existing group a member) if it is missing.
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
	for name, n := range t.groups {
		if !t.qgroupExists(n) {
			continue
		}
		if err := t.joinParent(n); err != nil {
			return 0, fmt.Errorf("quota group %s: %w", name, err)
		}
	}
	if err := t.save(); err != nil {
		return 0, err
	}
	return qgroupID(2, t.parent), nil
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
