package native

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/manager"
	"golang.org/x/sys/unix"
)

// hostFacts are the properties of this host that change the config we build.
type hostFacts struct {
	// swapLimit: the memory+swap limit can be set (cgroup v1 with swap
	// accounting, or cgroup v2, where a missing swap file is ignored).
	swapLimit bool
	// nofileHard is our own RLIMIT_NOFILE hard limit; a sandbox cannot be
	// given more without CAP_SYS_RESOURCE, which root lacks on some hosts.
	nofileHard uint64
	// coreHard is our RLIMIT_CORE hard limit, for the same reason.
	coreHard uint64
}

func probeHost() (hostFacts, error) {
	var h hostFacts
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return h, fmt.Errorf("read RLIMIT_NOFILE: %w", err)
	}
	h.nofileHard = rl.Max
	if err := unix.Getrlimit(unix.RLIMIT_CORE, &rl); err != nil {
		return h, fmt.Errorf("read RLIMIT_CORE: %w", err)
	}
	h.coreHard = rl.Max
	if cgroups.IsCgroup2UnifiedMode() {
		h.swapLimit = true
		return h, nil
	}
	mnt, err := cgroups.FindCgroupMountpoint("", "memory")
	if err != nil {
		return h, fmt.Errorf("cgroup v1 memory controller is not mounted (needed for memory limits): %w", err)
	}
	if _, err := cgroups.FindCgroupMountpoint("", "devices"); err != nil {
		return h, fmt.Errorf("cgroup v1 devices controller is not mounted (libcontainer refuses to run without it): %w", err)
	}
	_, err = os.Stat(filepath.Join(mnt, "memory.memsw.limit_in_bytes"))
	h.swapLimit = err == nil
	return h, nil
}

func validCgroupParent(p string) bool {
	if filepath.IsAbs(p) {
		return false
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." || part == "." {
			return false
		}
	}
	return true
}

// cgroupPath is the relative cgroup path libcontainer is given for id.
func (r *Runtime) cgroupPath(id string) string {
	return r.cgroupParent + "/" + id
}

// cgroupManager returns a manager for id's cgroups computed from the
// relative path alone (no state needed). Building it creates nothing.
func (r *Runtime) cgroupManager(id string) (cgroups.Manager, error) {
	return manager.New(&cgroups.Cgroup{Path: r.cgroupPath(id), Resources: &cgroups.Resources{}})
}

// cgroupDirs lists the host directories id's cgroups live in (whether or not
// they exist).
func (r *Runtime) cgroupDirs(id string) ([]string, error) {
	m, err := r.cgroupManager(id)
	if err != nil {
		return nil, err
	}
	var dirs []string
	for _, p := range m.GetPaths() {
		dirs = append(dirs, p)
	}
	return dirs, nil
}

// removeLeftovers kills whatever still runs in id's cgroups, removes them
// and removes id's state directory. It is the last resort for a sandbox whose
// state.json is missing or unreadable (a Start that died half-way).
func (r *Runtime) removeLeftovers(id string) error {
	var errs []error
	m, err := r.cgroupManager(id)
	if err != nil {
		errs = append(errs, fmt.Errorf("cgroup manager: %w", err))
	} else {
		if m.Exists() {
			_ = m.Freeze(cgroups.Thawed) // SIGKILL does not reach frozen v1 tasks
			if pids, err := m.GetAllPids(); err == nil {
				for _, pid := range pids {
					_ = unix.Kill(pid, unix.SIGKILL)
				}
			}
		}
		// RemovePaths retries while the killed tasks leave the cgroup.
		if err := m.Destroy(); err != nil {
			errs = append(errs, fmt.Errorf("remove cgroups: %w", err))
		}
	}
	if err := os.RemoveAll(filepath.Join(r.stateDir, id)); err != nil {
		errs = append(errs, fmt.Errorf("remove state dir: %w", err))
	}
	if err := r.roots.remove(id); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// RemoveParentCgroups removes the (empty) parent cgroup directories every
// sandbox's cgroups are made in. It is best effort: a parent that still
// holds a sandbox is busy and stays.
func (r *Runtime) RemoveParentCgroups() {
	dirs, err := r.cgroupDirs("x")
	if err != nil {
		return
	}
	for _, d := range dirs {
		_ = unix.Rmdir(filepath.Dir(d))
	}
}
