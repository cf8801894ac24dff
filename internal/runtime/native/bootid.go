package native

import (
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/opencontainers/runc/libcontainer/configs"
	"golang.org/x/sys/unix"
)

// Every start of a sandbox is a boot of its own: agents (and E2B's tests)
// read /proc/sys/kernel/random/boot_id to tell a reboot from a resume, and
// procfs would show them the host's. So each Start writes a fresh id into
// the sandbox's state directory (<StateDir>/<id>/boot_id: removed with the
// state, never part of the snapshotted root filesystem, so a fork or a
// restart gets a new one) and a hook mounts it, read-only, over procfs's
// file. A freeze and thaw touch neither, so a paused sandbox keeps its id.
//
// runc refuses a bind mount under /proc in the container's own mount list
// (checkProcMount), so the mount is made by a createContainer hook: the
// container's init runs it in the sandbox's mount namespace after /proc is
// mounted and before pivot_root, seccomp and the capability drop, with the
// sandbox's root as its working directory. The hook is this binary
// (/proc/self/exe of the init, the sealed copy libcontainer runs), which
// Init routes to mountBootID.

const (
	bootIDFile    = "boot_id"
	bootIDHookArg = "bootid-hook"
	// bootIDTarget is procfs's file, relative to the sandbox's root.
	bootIDTarget = "proc/sys/kernel/random/boot_id"
)

func (r *Runtime) bootIDPath(id string) string { return filepath.Join(r.stateDir, id, bootIDFile) }

// bootIDHook is the createContainer hook that mounts src over the sandbox's
// boot_id.
func bootIDHook(src string) configs.Hook {
	timeout := 10 * time.Second
	return configs.NewCommandHook(&configs.Command{
		Path: "/proc/self/exe",
		Args: []string{"warren", bootIDHookArg, src},
		// Nothing of the init's environment: a leftover _LIBCONTAINER_*
		// variable would send the hook into nsenter's container setup.
		Env:     []string{"WARREN_HOOK=" + bootIDHookArg},
		Timeout: &timeout,
	})
}

// writeBootID writes a new random id (a version 4 UUID, as the kernel's)
// to path.
func writeBootID(path string) error {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return err
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	id := fmt.Sprintf("%x-%x-%x-%x-%x\n", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
	return os.WriteFile(path, []byte(id), 0o444)
}

// runBootIDHook is the hook process: it mounts args[0] over the boot_id of
// the root filesystem it runs in (its working directory) and exits.
func runBootIDHook(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: bootid-hook FILE (run by the sandbox's init)")
		return 2
	}
	if err := mountBootID(args[0]); err != nil {
		fmt.Fprintln(os.Stderr, "boot id:", err)
		return 1
	}
	return 0
}

// mountBootID mounts src read-only over the procfs boot_id below the
// working directory. The target is resolved without following a symlink
// and must be on procfs: the sandbox's tree cannot point the mount
// elsewhere (its /proc is a fresh procfs mount by now).
func mountBootID(src string) error {
	target, err := unix.Openat2(unix.AT_FDCWD, bootIDTarget, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return fmt.Errorf("open %s: %w", bootIDTarget, err)
	}
	defer unix.Close(target)
	var fs unix.Statfs_t
	if err := unix.Fstatfs(target, &fs); err != nil {
		return fmt.Errorf("statfs %s: %w", bootIDTarget, err)
	}
	if fs.Type != unix.PROC_SUPER_MAGIC {
		return fmt.Errorf("%s is not on procfs (filesystem type %#x)", bootIDTarget, fs.Type)
	}
	tree, err := unix.OpenTree(unix.AT_FDCWD, src, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return fmt.Errorf("clone a mount of %s: %w", src, err)
	}
	defer unix.Close(tree)
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_NOEXEC}
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH, attr); err != nil {
		return fmt.Errorf("make the mount of %s read-only: %w", src, err)
	}
	if err := unix.MoveMount(tree, "", target, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("mount %s over %s: %w", src, bootIDTarget, err)
	}
	return nil
}
