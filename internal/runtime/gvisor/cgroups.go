package gvisor

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

const cgroupRoot = "/sys/fs/cgroup"

// hostFacts are the properties of this host that change the spec we write.
type hostFacts struct {
	// unified: cgroup v2 only (no v1 hierarchies).
	unified bool
	// swapLimit: the memory+swap limit can be set (v1 with swap
	// accounting, or v2).
	swapLimit bool
}

// cgroups finds the host cgroup directories runsc makes for each sandbox
// under parent, and records them in the sandbox's bundle.
type cgroups struct {
	parent  string // relative: runsc nests it under its caller's cgroups
	host    hostFacts
	bundles bundles
}

func probeHost() (hostFacts, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(cgroupRoot, &st); err != nil {
		return hostFacts{}, fmt.Errorf("cgroups are not mounted at %s: %w", cgroupRoot, err)
	}
	if st.Type == unix.CGROUP2_SUPER_MAGIC {
		return hostFacts{unified: true, swapLimit: true}, nil
	}
	mem := filepath.Join(cgroupRoot, "memory")
	if _, err := os.Stat(mem); err != nil {
		return hostFacts{}, fmt.Errorf("cgroup v1 memory controller is not mounted at %s (needed for memory limits)", mem)
	}
	_, err := os.Stat(filepath.Join(mem, "memory.memsw.limit_in_bytes"))
	return hostFacts{swapLimit: err == nil}, nil
}

// cgroupPath is the relative cgroup path runsc is given for id.
func (c *cgroups) cgroupPath(id string) string { return c.parent + "/" + id }

// expectedCgroupDirs lists the host directories runsc makes for id when
// started by this process: runsc nests a relative path under the cgroups of
// the process that runs it (our child, so ours), per controller on v1 and
// beside our own leaf on v2.
func (c *cgroups) expectedCgroupDirs(id string) ([]string, error) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	rel := c.cgroupPath(id)
	var dirs []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		// ID:controller[,controller]:path
		f := strings.SplitN(sc.Text(), ":", 3)
		if len(f) != 3 {
			continue
		}
		if c.host.unified {
			if f[1] == "" {
				dirs = append(dirs, filepath.Join(cgroupRoot, filepath.Dir(f[2]), rel))
			}
			continue
		}
		for _, ctrl := range strings.Split(f[1], ",") {
			ctrl = strings.TrimPrefix(ctrl, "name=")
			if ctrl == "" {
				continue
			}
			if _, err := os.Stat(filepath.Join(cgroupRoot, ctrl)); err != nil {
				continue
			}
			dirs = append(dirs, filepath.Join(cgroupRoot, ctrl, f[2], rel))
		}
	}
	slices.Sort(dirs)
	return slices.Compact(dirs), sc.Err()
}

// recordCgroups writes the cgroup directories runsc made for a sandbox
// just started into its bundle, so that they are found again (Stats,
// Destroy) by a daemon running elsewhere in the cgroup tree.
func (c *cgroups) recordCgroups(id string) error {
	dirs, err := c.expectedCgroupDirs(id)
	if err != nil {
		return err
	}
	var made []string
	for _, d := range dirs {
		if _, err := os.Stat(d); err == nil {
			made = append(made, d)
		}
	}
	return os.WriteFile(filepath.Join(c.bundles.bundle(id), "cgroups"), []byte(strings.Join(made, "\n")+"\n"), 0o600)
}

// cgroupDirs returns a sandbox's recorded cgroup directories, or the ones
// runsc would make from this process when none were recorded (a Start that
// died half-way).
func (c *cgroups) cgroupDirs(id string) ([]string, error) {
	data, err := os.ReadFile(filepath.Join(c.bundles.bundle(id), "cgroups"))
	if errors.Is(err, os.ErrNotExist) {
		return c.expectedCgroupDirs(id)
	}
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(data)), nil
}

// controllerDir returns the one of dirs that holds ctrl's files ("" on v2:
// the single unified directory).
func (c *cgroups) controllerDir(dirs []string, ctrl string) (string, bool) {
	if c.host.unified {
		if len(dirs) == 0 {
			return "", false
		}
		return dirs[0], true
	}
	prefix := filepath.Join(cgroupRoot, ctrl) + "/"
	for _, d := range dirs {
		if strings.HasPrefix(d, prefix) {
			return d, true
		}
	}
	return "", false
}

// removeCgroups kills whatever still runs in dirs and removes them. runsc
// delete normally leaves nothing; this is for a sandbox whose runsc state
// is gone or that runsc could not delete.
func removeCgroups(dirs []string) error {
	var errs []error
	for _, d := range dirs {
		if _, err := os.Stat(d); err != nil {
			continue
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			for _, pid := range cgroupPids(d) {
				_ = unix.Kill(pid, unix.SIGKILL)
			}
			err := unix.Rmdir(d)
			if err == nil || errors.Is(err, unix.ENOENT) {
				break
			}
			if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return errors.Join(errs...)
}

func cgroupPids(dir string) []int {
	data, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// RemoveParentCgroups removes the (empty) parent cgroup directories every
// sandbox's cgroups are made in. Best effort: a parent that still holds a
// sandbox is busy and stays.
func (c *cgroups) RemoveParentCgroups() {
	dirs, err := c.expectedCgroupDirs("x")
	if err != nil {
		return
	}
	for _, d := range dirs {
		_ = unix.Rmdir(filepath.Dir(d))
	}
}
