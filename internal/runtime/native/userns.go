package native

import (
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strconv"
	"unsafe"

	"github.com/opencontainers/runc/libcontainer/configs"
	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/runtime"
)

// #include <stdlib.h>
// int warren_userns_spawn(void **stack);
import "C"

// A sandbox started with a user namespace (runtime.Spec.UserNS) sees its
// root filesystem through an idmapped mount: a file owned by 0 on disk is
// owned by the sandbox's root, whose uid on the host is the range's first.
// Files stay as they were on disk, so snapshots, forks, templates and the
// host-side files API (which works on the subvolume itself) need no chown,
// and a fork can take a different range from its parent.
//
// libcontainer idmaps bind mounts but not the root, so the runtime makes
// the root's mount itself, before the container exists: a clone of the
// subvolume's tree, idmapped, moved to <usernsDir>/<id>/root. Every
// directory on that path must be searchable by the sandbox's root (an
// unmapped uid on the host), which is why it lives under its own 0711
// directory and not under the data directory. The boot id that the
// createContainer hook mounts (from inside the namespace) sits beside it
// for the same reason.

const (
	usernsRootName   = "root"
	usernsBootIDName = "boot_id"
)

// usernsDirFor is the default place of idmapped roots for a runtime
// keeping its state in stateDir: under /run (a tmpfs, so a reboot, which
// ends every sandbox anyway, leaves nothing mounted), one directory per
// state directory so that several daemons on one host keep apart.
func usernsDirFor(stateDir string) string {
	h := fnv.New64a()
	h.Write([]byte(stateDir))
	return filepath.Join("/run/warren-userns", strconv.FormatUint(h.Sum64(), 16))
}

// idmappedRoots is the directory of a runtime's idmapped roots.
type idmappedRoots string

func (d idmappedRoots) dir(id string) string { return filepath.Join(string(d), id) }

// mount mounts rootfs, idmapped by the user namespace ns, at
// <usernsDir>/<id>/root and returns that path. The directories it makes
// are searchable by anyone and readable by no one but root; a mount left by
// a crashed start is replaced.
func (d idmappedRoots) mount(id, rootfs string, ns *os.File) (string, error) {
	dir := d.dir(id)
	target := filepath.Join(dir, usernsRootName)
	if err := mkdir0711(filepath.Dir(string(d)), string(d), dir, target); err != nil {
		return "", err
	}
	// A leftover from a start that did not finish: never stack mounts.
	_ = unix.Unmount(target, unix.MNT_DETACH)
	tree, err := unix.OpenTree(unix.AT_FDCWD, rootfs, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return "", fmt.Errorf("clone the mount of %s: %w", rootfs, err)
	}
	defer unix.Close(tree)
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH, &unix.MountAttr{
		Attr_set:  unix.MOUNT_ATTR_IDMAP | unix.MOUNT_ATTR_NODEV,
		Userns_fd: uint64(ns.Fd()),
	}); err != nil {
		return "", fmt.Errorf("idmap the mount of %s (the filesystem must support idmapped mounts): %w", rootfs, err)
	}
	if err := unix.MoveMount(tree, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return "", fmt.Errorf("mount %s at %s: %w", rootfs, target, err)
	}
	return target, nil
}

// unmountAll unmounts every layer at path (a crashed start may have
// stacked one); EINVAL says nothing is mounted there any more.
func unmountAll(path string) error {
	for {
		err := unix.Unmount(path, unix.MNT_DETACH)
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("unmount %s: %w", path, err)
		}
	}
}

func mkdir0711(paths ...string) error {
	for _, p := range paths {
		err := os.Mkdir(p, 0o711)
		// The runtime's directory goes with its last sandbox (remove), which
		// may race with this start: make the parents again and retry.
		for try := 0; errors.Is(err, os.ErrNotExist) && try < 3; try++ {
			if err = os.MkdirAll(filepath.Dir(p), 0o711); err == nil {
				err = os.Mkdir(p, 0o711)
			}
		}
		if err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("make %s: %w", p, err)
		}
		// MkdirAll's umask or an older mode must not leave it unsearchable.
		if err := os.Chmod(p, 0o711); err != nil {
			return fmt.Errorf("chmod %s: %w", p, err)
		}
	}
	return nil
}

// idmapMountsWith makes cfg's idmapped mounts take their mapping from ns,
// the namespace the root's was made with: libcontainer would otherwise
// spawn a process of its own to make one more (a few ms of every start).
// libcontainer opens the path in this process, at Start only.
func idmapMountsWith(cfg *configs.Config, ns *os.File) {
	for _, m := range cfg.Mounts {
		if m.IsIDMapped() {
			m.IDMapping.UserNSPath = "/proc/self/fd/" + strconv.Itoa(int(ns.Fd()))
			m.IDMapping.UIDMappings, m.IDMapping.GIDMappings = nil, nil
		}
	}
}

// remove unmounts sandbox id's idmapped root and removes its
// directory; a sandbox without one is left as it is.
func (d idmappedRoots) remove(id string) error {
	dir := d.dir(id)
	target := filepath.Join(dir, usernsRootName)
	sys := filepath.Join(dir, usernsSysfsName)
	for _, m := range []string{target, sys} {
		if err := unmountAll(m); err != nil {
			return err
		}
	}
	// Never RemoveAll here: through a mount it would delete the sandbox's
	// files. Plain removes fail on anything unexpected instead.
	for _, p := range []string{filepath.Join(dir, usernsBootIDName), target, sys, dir} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", p, err)
		}
	}
	// The runtime's own directory goes with its last sandbox (it fails,
	// harmlessly, while others remain): nothing is left in /run by a
	// daemon whose sandboxes are all gone.
	_ = os.Remove(string(d))
	return nil
}

// openUserNS returns an fd of a new user namespace with u's mapping, for
// MOUNT_ATTR_IDMAP. The namespace lives as long as a mount or fd holds it;
// the process made to create it is gone when this returns.
func openUserNS(u runtime.IDRange) (*os.File, error) {
	var stack unsafe.Pointer
	pid, errno := C.warren_userns_spawn(&stack)
	if pid < 0 {
		return nil, fmt.Errorf("clone a user namespace: %w", errno)
	}
	defer func() {
		_ = unix.Kill(int(pid), unix.SIGKILL)
		var ws unix.WaitStatus
		for {
			if _, err := unix.Wait4(int(pid), &ws, 0, nil); !errors.Is(err, unix.EINTR) {
				break
			}
		}
		// Reaped: nothing runs on the child's stack any more.
		C.free(stack)
	}()
	m := fmt.Appendf(nil, "0 %d %d\n", u.HostID, u.Size)
	proc := "/proc/" + strconv.Itoa(int(pid))
	for _, f := range []string{"uid_map", "gid_map"} {
		if err := os.WriteFile(proc+"/"+f, m, 0); err != nil {
			return nil, fmt.Errorf("write %s of a new user namespace: %w", f, err)
		}
	}
	ns, err := os.Open(proc + "/ns/user")
	if err != nil {
		return nil, fmt.Errorf("open a new user namespace: %w", err)
	}
	return ns, nil
}
