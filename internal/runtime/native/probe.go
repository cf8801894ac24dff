package native

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/runtime"
)

// ProbeUserNS checks, once and in a few milliseconds, that this host can
// start sandboxes in user namespaces the way Start does: a user namespace
// with u's mapping can be made, a mount of dir (the storage pool, whose
// subvolumes become sandboxes' roots) can be idmapped with it, and sysfs
// can be mounted from the host for the sandbox to bind (sysfs.go). Nothing
// it makes outlives it: the idmapped clone is never attached anywhere.
func ProbeUserNS(dir string, u runtime.IDRange) error {
	ns, err := openUserNS(u)
	if err != nil {
		return fmt.Errorf("user namespaces: %w", err)
	}
	defer ns.Close()
	tree, err := unix.OpenTree(unix.AT_FDCWD, dir, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return fmt.Errorf("clone the mount of %s: %w", dir, err)
	}
	defer unix.Close(tree)
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH, &unix.MountAttr{
		Attr_set:  unix.MOUNT_ATTR_IDMAP,
		Userns_fd: uint64(ns.Fd()),
	}); err != nil {
		return fmt.Errorf("idmapped mounts of %s (its filesystem must support them): %w", dir, err)
	}
	sys, err := newSysfs()
	if err != nil {
		return err
	}
	return unix.Close(sys)
}
