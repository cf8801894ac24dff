// Command warren-gvisor-init is the first thing PID 1 runs in a gvisor
// sandbox. It writes the sandbox's task limit to gVisor's own pids cgroup
// and then execs the sandbox's real init, which keeps PID 1.
//
//	warren-gvisor-init --pids-max N -- ARGV...   set pids.max, exec ARGV
//	warren-gvisor-init --pids-max N              set pids.max and every process's
//	                                             RLIMIT_NPROC, exit (live updates;
//	                                             needs CAP_SYS_RESOURCE)
//
// It exists because runsc applies an OCI pids limit only to the host cgroup,
// which also counts gVisor's own threads, and cannot write the in-sandbox
// pids.max from outside, where the sandbox reads its limit. See package
// gvisor for how the limit is enforced. It is static (CGO_ENABLED=0): it
// runs in any root filesystem.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// Where gVisor mounts the sandbox's own pids cgroup (v1, its default), or
// the unified hierarchy (v2, --in-sandbox-cgroup=v2).
var pidsMaxPaths = []string{"/sys/fs/cgroup/pids/pids.max", "/sys/fs/cgroup/pids.max"}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "warren-gvisor-init: %v\n", err)
		os.Exit(127)
	}
}

func run(args []string) error {
	if len(args) < 2 || args[0] != "--pids-max" {
		return errors.New("usage: warren-gvisor-init --pids-max N [-- ARGV...]")
	}
	n, err := strconv.ParseInt(args[1], 10, 64)
	if err != nil || n <= 0 {
		return fmt.Errorf("--pids-max %q: want a positive number", args[1])
	}
	if err := setPidsMax(n); err != nil {
		return err
	}
	rest := args[2:]
	if len(rest) == 0 {
		return setNproc(uint64(n))
	}
	if rest[0] != "--" || len(rest) == 1 {
		return errors.New("usage: warren-gvisor-init --pids-max N [-- ARGV...]")
	}
	argv := rest[1:]
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return err
	}
	return fmt.Errorf("exec %s: %w", path, syscall.Exec(path, argv, os.Environ()))
}

func setPidsMax(n int64) error {
	for _, p := range pidsMaxPaths {
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		_, werr := f.WriteString(strconv.FormatInt(n, 10))
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return fmt.Errorf("set %s: %w", p, werr)
		}
		return nil
	}
	return fmt.Errorf("no pids cgroup mounted at %s", pidsMaxPaths[0])
}

// setNproc sets RLIMIT_NPROC (which gVisor enforces on every task of a
// uid) of every process in the sandbox; new processes inherit it.
func setNproc(n uint64) error {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return err
	}
	lim := unix.Rlimit{Cur: n, Max: n}
	var errs []error
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if err := unix.Prlimit(pid, unix.RLIMIT_NPROC, &lim, nil); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("set RLIMIT_NPROC of pid %d: %w", pid, err))
		}
	}
	return errors.Join(errs...)
}
