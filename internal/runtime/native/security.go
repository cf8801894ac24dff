package native

import (
	goruntime "runtime"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// defaultCapabilities is what root inside a sandbox keeps: enough to be root
// over its own files and processes (package managers chown, setuid to
// service users, bind low ports, set file capabilities), nothing that reaches
// the kernel or the host. Compared with Docker's default set:
//   - no CAP_NET_RAW: raw and packet sockets allow spoofing and have a long
//     record of kernel bugs; ping is not worth it.
//   - no CAP_MKNOD: device nodes are useless behind the device cgroup (only
//     the default devices are usable) and nothing an agent runs needs them.
//
// Never present: SYS_ADMIN (mount, namespaces, most escapes), SYS_MODULE,
// SYS_PTRACE (debuggers still work: tracing a process of one's own uid needs
// no capability, and the pid namespace bounds what is visible), SYS_RAWIO, SYS_TIME,
// SYS_BOOT, SYS_RESOURCE, NET_ADMIN, DAC_READ_SEARCH (open_by_handle_at),
// MAC_ADMIN, BPF, PERFMON, SYSLOG, …
func defaultCapabilities() []string {
	return []string{
		"CAP_CHOWN",            // chown files it owns the tree of
		"CAP_DAC_OVERRIDE",     // root ignores file modes, as users expect
		"CAP_FOWNER",           // chmod/utime on files owned by others
		"CAP_FSETID",           // keep setuid bits when root edits a file
		"CAP_KILL",             // signal processes of other uids (its own pid ns only)
		"CAP_SETGID",           // drop to service users (su, daemons)
		"CAP_SETUID",           //  "
		"CAP_SETPCAP",          // drop capabilities from children
		"CAP_SETFCAP",          // dpkg/apt set file capabilities on install
		"CAP_NET_BIND_SERVICE", // servers on ports < 1024 in its own netns
		"CAP_SYS_CHROOT",       // chroot-based build tools
		"CAP_AUDIT_WRITE",      // PAM (su, login) writes audit records or fails
	}
}

// maskedPaths are hidden (bind-mounted over with /dev/null or an empty
// tmpfs): they leak host details or offer kernel attack surface.
var maskedPaths = []string{
	"/proc/acpi",
	"/proc/asound",
	"/proc/interrupts",
	"/proc/kcore",
	"/proc/keys",
	"/proc/latency_stats",
	"/proc/sched_debug",
	"/proc/scsi",
	"/proc/timer_list",
	"/proc/timer_stats",
	"/sys/devices/virtual/powercap",
	"/sys/firmware",
}

// readonlyPaths are host-global knobs under /proc that stay readable.
var readonlyPaths = []string{
	"/proc/bus",
	"/proc/fs",
	"/proc/irq",
	"/proc/sys",
	"/proc/sysrq-trigger",
}

// Syscalls refused with EPERM. The filter is a deny list (default allow), as
// Docker's is in effect: most of these also need a capability the sandbox
// lacks, and the filter is the second wall in front of the kernel code they
// reach. Names the local libseccomp does not know are skipped.
var deniedSyscalls = []string{
	// kernel modules and replacing the kernel
	"init_module", "finit_module", "delete_module", "create_module",
	"query_module", "get_kernel_syms", "kexec_load", "kexec_file_load",
	// mounts (the old and the new mount API) and root switching
	"mount", "umount", "umount2", "mount_setattr", "move_mount", "open_tree",
	"fsopen", "fsconfig", "fsmount", "fspick", "pivot_root",
	// namespaces: unshare(CLONE_NEWUSER) needs no capability and would give
	// back CAP_SYS_ADMIN over a new mount namespace
	"unshare", "setns",
	// eBPF, perf and io_uring: large, often-exploited kernel surfaces
	"bpf", "perf_event_open", "io_uring_setup", "io_uring_enter", "io_uring_register",
	"userfaultfd",
	// the kernel keyring is not namespaced
	"keyctl", "add_key", "request_key",
	// host-wide state
	"reboot", "swapon", "swapoff", "syslog", "acct", "settimeofday", "stime",
	"clock_settime", "clock_adjtime", "sethostname", "setdomainname",
	"quotactl", "quotactl_fd", "nfsservctl", "_sysctl", "sysfs", "ustat", "uselib",
	"lookup_dcookie", "fanotify_init",
	// file handles bypass path-based checks (the "shocker" escape)
	"open_by_handle_at", "name_to_handle_at",
	// cross-process memory access beyond ptrace's own checks; NUMA moves
	"process_vm_readv", "process_vm_writev", "kcmp", "move_pages", "migrate_pages",
	// raw I/O ports and legacy modes
	"iopl", "ioperm", "vm86", "vm86old",
}

// namespaceCloneFlags are refused in clone(2)'s flags for the same reason as
// unshare.
var namespaceCloneFlags = []uint64{
	unix.CLONE_NEWNS, unix.CLONE_NEWCGROUP, unix.CLONE_NEWUTS, unix.CLONE_NEWIPC,
	unix.CLONE_NEWUSER, unix.CLONE_NEWPID, unix.CLONE_NEWNET,
}

func seccompArchitectures() []specs.Arch {
	switch goruntime.GOARCH {
	case "amd64":
		return []specs.Arch{specs.ArchX86_64, specs.ArchX86, specs.ArchX32}
	case "arm64":
		return []specs.Arch{specs.ArchAARCH64, specs.ArchARM}
	default:
		return nil // native architecture only
	}
}

// defaultSeccomp is the sandbox's syscall filter. sethostname is denied even
// though the sandbox has its own UTS namespace: the hostname is set by the
// runtime and the agent reports it; changing it needs CAP_SYS_ADMIN anyway.
func defaultSeccomp() *specs.LinuxSeccomp {
	eperm := uint(unix.EPERM)
	enosys := uint(unix.ENOSYS)
	calls := []specs.LinuxSyscall{{
		Names:    deniedSyscalls,
		Action:   specs.ActErrno,
		ErrnoRet: &eperm,
	}}
	for _, flag := range namespaceCloneFlags {
		calls = append(calls, specs.LinuxSyscall{
			Names:    []string{"clone"},
			Action:   specs.ActErrno,
			ErrnoRet: &eperm,
			// (flags & flag) == flag. On x86 and arm64 the flags are arg 0.
			Args: []specs.LinuxSeccompArg{{Index: 0, Value: flag, ValueTwo: flag, Op: specs.OpMaskedEqual}},
		})
	}
	// clone3 passes its flags in memory the filter cannot read: answer
	// ENOSYS so that libc falls back to clone, whose flags it can.
	calls = append(calls, specs.LinuxSyscall{
		Names:    []string{"clone3"},
		Action:   specs.ActErrno,
		ErrnoRet: &enosys,
	})
	return &specs.LinuxSeccomp{
		DefaultAction: specs.ActAllow,
		Architectures: seccompArchitectures(),
		Syscalls:      calls,
	}
}
