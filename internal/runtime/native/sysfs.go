package native

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"

	"golang.org/x/sys/unix"
)

// A sandbox in a user namespace that joins a network namespace the daemon
// made (one owned by the host's user namespace) may not mount sysfs: the
// kernel lets only a namespace owning the network namespace do that. So the
// runtime mounts it for the sandbox, from the host, tagged with the
// sandbox's network namespace (so /sys/class/net lists its interfaces, not
// the host's), and the sandbox gets a bind of that mount. A bind of the
// host's whole /sys would show the host's interfaces and every mount under
// it.

const usernsSysfsName = "sys"

// sysfs mounts a read-only sysfs of the network namespace at netns at
// <dir>/<id>/sys (the directory mount made) and returns that path.
func (d idmappedRoots) sysfs(id, netns string) (string, error) {
	target := filepath.Join(d.dir(id), usernsSysfsName)
	if err := os.Mkdir(target, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("make %s: %w", target, err)
	}
	_ = unix.Unmount(target, unix.MNT_DETACH)
	mnt, err := sysfsIn(netns)
	if err != nil {
		return "", err
	}
	defer unix.Close(mnt)
	if err := unix.MoveMount(mnt, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return "", fmt.Errorf("mount sysfs at %s: %w", target, err)
	}
	return target, nil
}

// sysfsIn makes a detached, read-only sysfs mount whose network view is
// the namespace at netns: made on a thread that joins it for the time of
// fsopen (which takes the caller's network namespace) and leaves again.
func sysfsIn(netns string) (int, error) {
	ns, err := os.Open(netns)
	if err != nil {
		return -1, fmt.Errorf("open network namespace: %w", err)
	}
	defer ns.Close()
	goruntime.LockOSThread()
	self, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		goruntime.UnlockOSThread()
		return -1, fmt.Errorf("open own network namespace: %w", err)
	}
	defer self.Close()
	if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
		goruntime.UnlockOSThread()
		return -1, fmt.Errorf("join network namespace %s: %w", netns, err)
	}
	mnt, merr := newSysfs()
	if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
		// The thread stays locked, so it ends with this goroutine instead
		// of running other goroutines in the sandbox's namespace.
		if merr == nil {
			unix.Close(mnt)
		}
		return -1, fmt.Errorf("leave network namespace %s: %w", netns, err)
	}
	goruntime.UnlockOSThread()
	return mnt, merr
}

func newSysfs() (int, error) {
	fs, err := unix.Fsopen("sysfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("fsopen sysfs: %w", err)
	}
	defer unix.Close(fs)
	if err := unix.FsconfigCreate(fs); err != nil {
		return -1, fmt.Errorf("create sysfs: %w", err)
	}
	mnt, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
	if err != nil {
		return -1, fmt.Errorf("mount sysfs: %w", err)
	}
	return mnt, nil
}
