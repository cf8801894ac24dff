package btrfs

import (
	"fmt"
	"os"
	"strconv"
	"strings"
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
