// Package favordynmods turns on the kernel's favordynmods cgroup option.
//
// Starting a sandbox moves its first process into the sandbox's cgroups.
// Without the option every such move takes the kernel's global threadgroup
// lock for writing, which first waits for an RCU grace period whenever no
// other move happened in the last one: 10–18 ms here, about a third of a
// sandbox start. With it the move locks only the moved process's thread
// group (kernel 6.18; older kernels keep the global lock in a mode where
// writers do not wait), and forks and exits pay a little more instead.
//
// The option belongs to the cgroup superblock but its effect is host-wide,
// and on kernels with the per-threadgroup lock it cannot be turned off
// again until reboot. warren turns it on at start unless told not to.
package favordynmods

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/mountinfo"
)

// Option is the mount option's name.
const Option = "favordynmods"

const featuresPath = "/sys/kernel/cgroup/features"

// Result says what Enable found or did.
type Result struct {
	// MountPoint is the cgroup2 mount whose superblock carries the option.
	MountPoint string
	// Already is true when the option was on before Enable.
	Already bool
}

// ErrUnsupported is returned (wrapped) when the host cannot take the
// option: a kernel older than 6.0, or no cgroup2 mount.
var ErrUnsupported = errors.New("favordynmods is not available")

// Enable turns the option on for the host's cgroup2 hierarchy, keeping its
// other options. It changes nothing when the option is already on.
func Enable() (Result, error) {
	features, err := os.ReadFile(featuresPath)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return Result{}, fmt.Errorf("read %s: %w", featuresPath, err)
	}
	mounts, err := mountinfo.Read()
	if err != nil {
		return Result{}, err
	}
	p, err := plan(mounts, strings.Fields(string(features)))
	if err != nil || p.Already {
		return p.Result, err
	}
	if err := reconfigure(p.MountPoint, p.options); err != nil {
		return Result{}, err
	}
	return p.Result, nil
}

// enablePlan is what Enable is to do: options are the superblock options
// to set, Option among them.
type enablePlan struct {
	Result
	options []string
}

// plan picks the cgroup2 mount to reconfigure and the options to give it.
// The superblock's options are replaced as a whole on reconfigure, so the
// ones it has stay in the list; "rw" and "ro" are the mount's, not
// cgroup2's, and are left out.
func plan(mounts []mountinfo.Mount, features []string) (enablePlan, error) {
	if !slices.Contains(features, Option) {
		return enablePlan{}, fmt.Errorf("%w: the kernel does not list it in %s (it needs 6.0 or later)", ErrUnsupported, featuresPath)
	}
	for _, m := range mounts {
		if m.FSType != "cgroup2" {
			continue
		}
		p := enablePlan{Result: Result{MountPoint: m.MountPoint}}
		if slices.Contains(m.SuperOptions, Option) {
			p.Already = true
			return p, nil
		}
		for _, o := range m.SuperOptions {
			if o != "rw" && o != "ro" && o != "" {
				p.options = append(p.options, o)
			}
		}
		p.options = append(p.options, Option)
		return p, nil
	}
	return enablePlan{}, fmt.Errorf("%w: no cgroup2 hierarchy is mounted", ErrUnsupported)
}

// reconfigure sets options on the superblock mounted at mountPoint through
// fspick(2), which leaves the mount's own flags (nosuid, ro, ...) alone;
// nothing changes unless every option is accepted.
func reconfigure(mountPoint string, options []string) error {
	fd, err := unix.Fspick(unix.AT_FDCWD, mountPoint, unix.FSPICK_CLOEXEC|unix.FSPICK_NO_AUTOMOUNT)
	if err != nil {
		return fmt.Errorf("fspick %s: %w", mountPoint, err)
	}
	defer unix.Close(fd)
	for _, o := range options {
		if err := unix.FsconfigSetFlag(fd, o); err != nil {
			return fmt.Errorf("cgroup2 option %q on %s: %w", o, mountPoint, err)
		}
	}
	if err := unix.FsconfigReconfigure(fd); err != nil {
		return fmt.Errorf("reconfigure cgroup2 at %s with %s: %w", mountPoint, strings.Join(options, ","), err)
	}
	return nil
}
