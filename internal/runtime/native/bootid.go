package native

import (
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/opencontainers/runc/libcontainer/configs"

	"github.com/warrenhq/warren/internal/runtime"
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
// (/proc/self/exe of the init, the sealed copy libcontainer runs) with
// WARREN_BOOTID_HOOK set: a C constructor (bootid_hook.c) then mounts the
// file and exits before the Go runtime starts.

// #cgo CFLAGS: -Wall -Werror
import "C"

const (
	bootIDFile = "boot_id"
	// bootIDHookEnv names the file for the hook to mount; bootid_hook.c
	// reads it.
	bootIDHookEnv = "WARREN_BOOTID_HOOK"
)

// bootIDPath is where the boot id of sandbox id is kept under stateDir.
func bootIDPath(stateDir, id string) string { return filepath.Join(stateDir, id, bootIDFile) }

// bootIDSource is where spec's boot id is kept: in the state directory, or,
// for a sandbox in a user namespace, whose root cannot search the state
// directory to mount it, beside its idmapped root (userns.go).
func bootIDSource(stateDir string, roots idmappedRoots, spec runtime.Spec) string {
	if spec.UserNS != nil {
		return filepath.Join(roots.dir(spec.ID), usernsBootIDName)
	}
	return bootIDPath(stateDir, spec.ID)
}

// bootIDHook is the createContainer hook that mounts src over the sandbox's
// boot_id.
func bootIDHook(src string) configs.Hook {
	timeout := 10 * time.Second
	return configs.NewCommandHook(&configs.Command{
		Path: "/proc/self/exe",
		Args: []string{"warren-bootid-hook"},
		// Nothing of the init's environment: a leftover _LIBCONTAINER_*
		// variable would send the hook into nsenter's container setup.
		Env:     []string{bootIDHookEnv + "=" + src},
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
