package native

import (
	"path/filepath"

	"github.com/opencontainers/runc/libcontainer/configs"
	"github.com/opencontainers/runc/libcontainer/specconv"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/runtime"
	"github.com/warrenhq/warren/internal/runtime/oci"
)

// cpuPeriod is the CFS period (µs) a CPU quota is expressed against.
const cpuPeriod = 100_000

// wantNofile is the open-files limit a sandbox gets (capped at ours).
const wantNofile = 1 << 20

// buildConfig turns spec into a libcontainer config. It goes through an OCI
// runtime spec and libcontainer's own converter (specconv), the same path
// runc takes, so that mounts, devices and seccomp are translated by the
// library's tested code rather than by hand.
func (r *Runtime) buildConfig(spec runtime.Spec) (*configs.Config, error) {
	oci := r.ociSpec(spec)
	if d := spec.Devices; d != nil {
		// CDI edits: device nodes (made in the sandbox's /dev), an allow
		// rule per node after the deny-all above, mounts, env.
		if err := d.Apply(oci); err != nil {
			return nil, err
		}
	}
	cfg, err := specconv.CreateLibcontainerConfig(&specconv.CreateOpts{
		CgroupName: spec.ID,
		Spec:       oci,
		// The kernel keyring is not namespaced: give each sandbox its own
		// session keyring (keyctl is also blocked by seccomp).
		NoNewKeyring: false,
	})
	if err != nil {
		return nil, err
	}
	nofile := min(uint64(wantNofile), r.host.nofileHard)
	cfg.Rlimits = []configs.Rlimit{
		{Type: unix.RLIMIT_NOFILE, Soft: nofile, Hard: nofile},
		// No core files: they would land in the sandbox's tree and can be
		// large; a debugging user can raise the soft limit.
		{Type: unix.RLIMIT_CORE, Soft: 0, Hard: r.host.coreHard},
	}
	// Sandboxes must outlive the daemon: no parent-death signal.
	cfg.ParentDeathSignal = 0
	cfg.Hooks = configs.Hooks{configs.CreateContainer: {bootIDHook(bootIDSource(r.stateDir, r.roots, spec))}}
	return cfg, nil
}

func (r *Runtime) ociSpec(spec runtime.Spec) *specs.Spec {
	lim := spec.Limits.WithDefaults()
	hostname := spec.Hostname
	if hostname == "" {
		hostname = spec.ID
	}
	caps := defaultCapabilities()
	mem := lim.MemoryBytes
	quota := lim.CPUMillis * cpuPeriod / 1000
	period := uint64(cpuPeriod)
	pids := lim.Pids
	res := &specs.LinuxResources{
		// Deny every device, then specconv appends its default allow list
		// (null, zero, full, random, urandom, tty, ptmx, pts).
		Devices: []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}},
		Memory:  &specs.LinuxMemory{Limit: &mem},
		CPU:     &specs.LinuxCPU{Quota: &quota, Period: &period},
		Pids:    &specs.LinuxPids{Limit: &pids},
	}
	if r.host.swapLimit {
		// memory+swap equal to memory: the sandbox cannot swap.
		swap := mem
		res.Memory.Swap = &swap
	}
	out := &specs.Spec{
		Version:  specs.Version,
		Root:     &specs.Root{Path: spec.RootFS, Readonly: false},
		Hostname: hostname,
		Process: &specs.Process{
			User:            specs.User{UID: 0, GID: 0},
			Args:            spec.Init,
			Cwd:             spec.Cwd,
			NoNewPrivileges: spec.NoNewPrivileges,
			Capabilities: &specs.LinuxCapabilities{
				Bounding:  caps,
				Effective: caps,
				Permitted: caps,
			},
		},
		Mounts: append(standardMounts(), oci.BindMounts(spec.Mounts)...),
		Linux: &specs.Linux{
			CgroupsPath: r.cgroupPath(spec.ID),
			Resources:   res,
			Namespaces: []specs.LinuxNamespace{
				{Type: specs.MountNamespace},
				{Type: specs.PIDNamespace},
				{Type: specs.UTSNamespace},
				{Type: specs.IPCNamespace},
				netNamespace(spec.NetNS),
				{Type: specs.CgroupNamespace},
			},
			MaskedPaths:       maskedPaths,
			ReadonlyPaths:     readonlyPaths,
			RootfsPropagation: "rprivate",
			Seccomp:           defaultSeccomp(),
		},
	}
	if spec.UserNS != nil {
		sys := ""
		if spec.NetNS != "" {
			sys = filepath.Join(r.roots.dir(spec.ID), usernsSysfsName)
		}
		inUserNS(out, *spec.UserNS, sys)
	}
	return out
}

// inUserNS puts the sandbox into a user namespace mapping its ids 0..Size-1
// to u's host range. Bind mounts are idmapped with the same map, so the
// host's root-owned agent binary, socket directory and resolv.conf are
// root's inside, as they are without a namespace. (The root filesystem is
// idmapped by Start: see userns.go.) sysfs, if not "", is the sysfs mount
// Start made for a sandbox joining a network namespace (sysfs.go): a bind
// of it stands for the sysfs mount the kernel would refuse.
func inUserNS(s *specs.Spec, u runtime.IDRange, sysfs string) {
	m := []specs.LinuxIDMapping{{ContainerID: 0, HostID: u.HostID, Size: u.Size}}
	s.Linux.UIDMappings = m
	s.Linux.GIDMappings = m
	s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: specs.UserNamespace})
	for i, mnt := range s.Mounts {
		switch {
		case mnt.Type == "bind":
			s.Mounts[i].Options = append(mnt.Options, "idmap")
		case mnt.Type == "sysfs" && sysfs != "":
			// sysfs has no idmapped mounts; it is read-only anyway.
			s.Mounts[i] = specs.Mount{Destination: "/sys", Type: "bind", Source: sysfs,
				Options: []string{"bind", "nosuid", "noexec", "nodev", "ro"}}
		}
	}
}

// netNamespace is the sandbox's network namespace: the prepared one it was
// given (its network is set up, loopback included), or else a private one
// whose loopback specconv configures and where nothing else is reachable.
func netNamespace(path string) specs.LinuxNamespace {
	return specs.LinuxNamespace{Type: specs.NetworkNamespace, Path: path}
}

// standardMounts are what a Linux userland expects to find. /tmp is left as
// it is in the root filesystem (it is part of the sandbox's snapshotted
// state).
func standardMounts() []specs.Mount {
	return []specs.Mount{
		{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
		{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}},
		{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
		{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
		// Read-only and rooted at the sandbox's own cgroup (cgroupns), so
		// tools inside can read their limits and usage.
		{Destination: "/sys/fs/cgroup", Type: "cgroup", Source: "cgroup", Options: []string{"nosuid", "noexec", "nodev", "relatime", "ro"}},
	}
}

func validateSpec(spec runtime.Spec) error { return spec.Validate() }
