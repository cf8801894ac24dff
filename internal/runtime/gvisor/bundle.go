package gvisor

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/warrenhq/warren/internal/runtime"
	"github.com/warrenhq/warren/internal/runtime/oci"
)

const (
	// cpuPeriod is the CFS period (µs) a CPU quota is expressed against.
	cpuPeriod = 100_000
	// nofile is the open-files limit inside. gVisor's kernel keeps its own
	// rlimits, so it is not capped by the daemon's host limit.
	nofile = 1 << 20
	// defaultPath is PID 1's PATH when the spec's environment has none.
	defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
)

// The user's pids limit N is applied in three places:
//
//   - RLIMIT_NPROC = N for PID 1, inherited by every process: gVisor's
//     kernel counts each task (thread) of a uid against it and refuses a
//     fork beyond it with EAGAIN. Root inside lacks CAP_SYS_RESOURCE and
//     CAP_SYS_ADMIN, so root is held too. This is what enforces N. (Tasks
//     of different uids are counted apart, so a sandbox running several
//     users can exceed N in total; the host limit below still holds.)
//   - pids.max = N in gVisor's own pids cgroup (set by warren-gvisor-init):
//     what the sandbox reads as its limit. gVisor checks it too, but in this
//     version charges a new task to only one of its cgroup v1 hierarchies,
//     picked at random, so on its own it is not a reliable limit.
//   - the host cgroup's pids.max = pidsPerTask×N + pidsAllowance: a backstop
//     against gVisor itself. The host cgroup counts every host thread of the
//     sandbox: gVisor's own (the Sentry's Go runtime and the gofer: ~25 idle,
//     more while many tasks block in host syscalls) and, on systrap, about
//     two per user process (a stub process per address space and its thread;
//     threads of one process share them). Measured here: 25 idle, 127 with
//     50 sleeping processes, 829 with 400, +1 for one process with 200
//     threads. Hitting it kills the whole sandbox (the Sentry cannot make a
//     thread), which the limits inside keep from happening.
const (
	pidsPerTask   = 3
	pidsAllowance = 256
)

func hostPidsLimit(user int64) int64 { return pidsPerTask*user + pidsAllowance }

// specWriter turns a runtime.Spec into an OCI bundle's spec.
type specWriter struct {
	init    string // warren-gvisor-init on the host, bind-mounted at InitPath
	host    hostFacts
	cgroups *cgroups
}

// ociSpec turns spec into the bundle's config.json.
func (w specWriter) ociSpec(spec runtime.Spec) *specs.Spec {
	lim := spec.Limits.WithDefaults()
	hostname := spec.Hostname
	if hostname == "" {
		hostname = spec.ID
	}
	caps := defaultCapabilities()
	mem := lim.MemoryBytes
	quota := lim.CPUMillis * cpuPeriod / 1000
	period := uint64(cpuPeriod)
	hostPids := hostPidsLimit(lim.Pids)
	res := &specs.LinuxResources{
		Memory: &specs.LinuxMemory{Limit: &mem},
		CPU:    &specs.LinuxCPU{Quota: &quota, Period: &period},
		Pids:   &specs.LinuxPids{Limit: &hostPids},
	}
	if w.host.swapLimit {
		// memory+swap equal to memory: the sandbox cannot swap.
		swap := mem
		res.Memory.Swap = &swap
	}
	cwd := spec.Cwd
	if cwd == "" {
		cwd = "/"
	}
	args := append([]string{InitPath, "--pids-max", strconv.FormatInt(lim.Pids, 10), "--"}, spec.Init...)
	mounts := append(standardMounts(), specs.Mount{
		Destination: InitPath, Type: "bind", Source: w.init,
		Options: []string{"bind", "ro", "nosuid", "nodev"},
	})
	if tmp, ok := rootTmp(spec); ok {
		mounts = append(mounts, tmp)
	}
	netns := specs.LinuxNamespace{Type: specs.NetworkNamespace}
	if spec.NetNS != "" {
		netns.Path = spec.NetNS
	}
	return &specs.Spec{
		Version:  specs.Version,
		Root:     &specs.Root{Path: spec.RootFS, Readonly: false},
		Hostname: hostname,
		Process: &specs.Process{
			User:            specs.User{UID: 0, GID: 0},
			Args:            args,
			Env:             withPath(spec.Env),
			Cwd:             cwd,
			NoNewPrivileges: spec.NoNewPrivileges,
			Capabilities: &specs.LinuxCapabilities{
				Bounding:  caps,
				Effective: caps,
				Permitted: caps,
			},
			Rlimits: []specs.POSIXRlimit{
				{Type: "RLIMIT_NOFILE", Soft: nofile, Hard: nofile},
				// gVisor counts every task against its uid's RLIMIT_NPROC
				// (root inside lacks CAP_SYS_RESOURCE and CAP_SYS_ADMIN, so
				// root is held too): the user's pids limit, exactly.
				{Type: "RLIMIT_NPROC", Soft: uint64(lim.Pids), Hard: uint64(lim.Pids)},
				// No core files: they would land in the sandbox's tree.
				{Type: "RLIMIT_CORE", Soft: 0, Hard: 0},
			},
		},
		Mounts: append(mounts, oci.BindMounts(spec.Mounts)...),
		Linux: &specs.Linux{
			CgroupsPath: w.cgroups.cgroupPath(spec.ID),
			Resources:   res,
			Namespaces: []specs.LinuxNamespace{
				{Type: specs.MountNamespace},
				{Type: specs.PIDNamespace},
				{Type: specs.UTSNamespace},
				{Type: specs.IPCNamespace},
				netns,
				{Type: specs.CgroupNamespace},
			},
		},
	}
}

// defaultCapabilities is what root inside keeps; the same set as the native
// runtime's (see there for why each one), here enforced by gVisor's kernel.
func defaultCapabilities() []string {
	return []string{
		"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL",
		"CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_SETFCAP",
		"CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_AUDIT_WRITE",
	}
}

// standardMounts are what a Linux userland expects to find; gVisor serves
// each from its own kernel (its procfs, sysfs, cgroupfs), never the host's.
func standardMounts() []specs.Mount {
	return []specs.Mount{
		{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
		{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}},
		{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
		{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
		// gVisor's own cgroupfs: the sandbox reads its limits there.
		{Destination: "/sys/fs/cgroup", Type: "cgroup", Source: "cgroup", Options: []string{"nosuid", "noexec", "nodev", "relatime", "ro"}},
	}
}

// rootTmp bind-mounts the root filesystem's own /tmp onto /tmp. runsc
// otherwise hides an empty /tmp under a tmpfs in gVisor's memory, whose
// files a snapshot of the sandbox's tree would miss and a restart would
// lose; the native runtime leaves /tmp in the tree. A tree without /tmp
// gets one (mode 1777, as every distribution has). Only a real directory is
// mounted (a symlink there would be followed on the host); a spec that
// mounts /tmp itself keeps its mount.
func rootTmp(spec runtime.Spec) (specs.Mount, bool) {
	for _, m := range spec.Mounts {
		if filepath.Clean(m.Destination) == "/tmp" {
			return specs.Mount{}, false
		}
	}
	src := filepath.Join(spec.RootFS, "tmp")
	st, err := os.Lstat(src)
	if errors.Is(err, os.ErrNotExist) && os.Mkdir(src, 0o755) == nil && os.Chmod(src, 0o1777) == nil {
		st, err = os.Lstat(src)
	}
	if err != nil || !st.IsDir() {
		return specs.Mount{}, false
	}
	return specs.Mount{Destination: "/tmp", Type: "bind", Source: src, Options: []string{"rbind", "rprivate"}}, true
}

// withPath adds a default PATH when env has none.
func withPath(env []string) []string {
	for _, e := range env {
		if strings.HasPrefix(e, "PATH=") {
			return env
		}
	}
	return append(append([]string(nil), env...), defaultPath)
}

func writeSpec(path string, s *specs.Spec) error {
	data, err := json.MarshalIndent(s, "", "\t")
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

func validateSpec(spec runtime.Spec) error {
	if err := spec.Validate(); err != nil {
		return err
	}
	for _, m := range spec.Mounts {
		if filepath.Clean(m.Destination) == InitPath {
			return fmt.Errorf("mount destination %s is reserved for the runtime", InitPath)
		}
	}
	return nil
}
