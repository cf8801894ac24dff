package btrfs

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/storage"
)

// sysfsBtrfs is where the kernel shows each mounted btrfs, by uuid.
const sysfsBtrfs = "/sys/fs/btrfs"

// qgroupUsage reads the space accounted to the level-0 qgroup of the
// subvolume open at fd. It reads the kernel's in-memory counters through
// sysfs rather than searching the quota tree: those are current, while the
// tree only changes at transaction commit. ok is false when quotas are off.
func qgroupUsage(fd int) (exclusive, referenced int64, ok bool) {
	id, err := subvolID(fd)
	if err != nil {
		return 0, 0, false
	}
	uuid, err := fsUUID(fd)
	if err != nil {
		return 0, 0, false
	}
	dir := fmt.Sprintf("%s/%s/qgroups/0_%d", sysfsBtrfs, uuid, id)
	excl, err1 := readInt(dir + "/exclusive")
	ref, err2 := readInt(dir + "/referenced")
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return excl, ref, true
}

// quotasEnabled tells whether the filesystem of fd accounts space per subvolume.
func quotasEnabled(fd int) bool {
	uuid, err := fsUUID(fd)
	if err != nil {
		return false
	}
	_, err = os.Stat(fmt.Sprintf("%s/%s/qgroups", sysfsBtrfs, uuid))
	return err == nil
}

func readInt(p string) (int64, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// usage reads what the qgroup q (a group's, or their parent's) is charged
// and its cap (0: none) from sysfs, the kernel's in-memory counters.
func (t *groupTable) usage(q uint64) (used, limit int64, err error) {
	dir := fmt.Sprintf("%s/%d_%d", t.qgroups, q>>48, q&(1<<48-1))
	if used, err = readInt(dir + "/exclusive"); err != nil {
		return 0, 0, err
	}
	flags, err := readInt(dir + "/limit_flags")
	if err != nil {
		return 0, 0, err
	}
	if flags&qgroupLimitMaxExcl != 0 {
		if limit, err = readInt(dir + "/max_exclusive"); err != nil {
			return 0, 0, err
		}
	}
	return used, limit, nil
}

var _ storage.VolumeLimiter = (*Storage)(nil)

// SetVolumeLimit implements storage.VolumeLimiter with a cap on the
// volume's own level-0 qgroup: simple quotas charge it every extent the
// volume writes, so the cap is the bytes written into it and nothing else.
func (v *volumes) SetVolumeLimit(ctx context.Context, key storage.Key, bytes int64) error {
	if err := key.Validate(); err != nil {
		return err
	}
	if bytes < 0 {
		return fmt.Errorf("volume %s: limit %d is negative (0 means no limit): %w", key, bytes, errdefs.ErrInvalid)
	}
	f, err := v.openSubvol(key)
	if err != nil {
		return fmt.Errorf("set limit of %s: %w", key, err)
	}
	defer f.Close()
	if !quotasEnabled(int(f.Fd())) {
		return fmt.Errorf("set limit of %s: the pool has no quotas: %w", key, errdefs.ErrUnsupported)
	}
	id, err := subvolID(int(f.Fd()))
	if err != nil {
		return fmt.Errorf("set limit of %s: %w", key, errnoKind(err))
	}
	if err := qgroupSetMaxExcl(int(f.Fd()), qgroupID(0, id), uint64(bytes)); err != nil {
		return fmt.Errorf("set limit of %s to %d bytes: %w", key, bytes, errnoKind(err))
	}
	return nil
}
