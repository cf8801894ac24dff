// The boot-id hook, in C so that it runs before the Go runtime starts: the
// sandbox's init runs this binary as a createContainer hook at every start
// (see bootid.go), and the Go runtime and the ~180 package initialisers
// that run before any Go code could act cost 10-25 ms of each start where
// this costs a fork and exec. It acts only when WARREN_BOOTID_HOOK names
// the file to mount; otherwise it returns and the binary runs as usual.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>

// Relative to the hook's working directory, the sandbox's root.
static const char bootid_target[] = "proc/sys/kernel/random/boot_id";

static void bootid_fail(const char *what) {
	fprintf(stderr, "boot id: %s: %s\n", what, strerror(errno));
	_exit(1);
}

// bootid_mount mounts src read-only over procfs's boot_id. The target is
// resolved without following a symlink and must be on procfs, so the
// sandbox's tree cannot point the mount anywhere else (its /proc is a
// fresh procfs mount by the time the hook runs).
static void bootid_mount(const char *src) {
	struct open_how how = {
		.flags = O_PATH | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	int target = syscall(SYS_openat2, AT_FDCWD, bootid_target, &how, sizeof how);
	if (target < 0)
		bootid_fail("open the sandbox's boot_id");
	struct statfs fs;
	if (fstatfs(target, &fs) < 0)
		bootid_fail("statfs the sandbox's boot_id");
	if (fs.f_type != PROC_SUPER_MAGIC) {
		fprintf(stderr, "boot id: %s is not on procfs (type %#lx)\n", bootid_target, (unsigned long)fs.f_type);
		_exit(1);
	}
	int tree = syscall(SYS_open_tree, AT_FDCWD, src, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	if (tree < 0)
		bootid_fail("clone a mount of the boot id file");
	struct mount_attr attr = {
		.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
	};
	if (syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH, &attr, sizeof attr) < 0)
		bootid_fail("make the boot id mount read-only");
	if (syscall(SYS_move_mount, tree, "", target, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
		bootid_fail("mount over the sandbox's boot_id");
	_exit(0);
}

__attribute__((constructor)) static void warren_bootid_hook(void) {
	const char *src = getenv("WARREN_BOOTID_HOOK");
	if (src != NULL && src[0] != '\0')
		bootid_mount(src);
}
