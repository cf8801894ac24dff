package bench

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/ids"
	"github.com/warrenhq/warren/internal/mountinfo"
)

// cpuMeter accounts the CPU of the bench's process (the daemon, and the
// bench's own client beside it) and of everything it starts: the
// runtime's init, the agent, runsc. It moves the process into a cgroup of
// its own before the daemon opens; the runtimes make sandboxes' cgroups
// relative to their caller's, so every sandbox nests under it, and a
// cgroup's usage keeps what its removed children used.
type cpuMeter struct {
	kind  string // "cgroup v1 cpuacct", "cgroup v2 cpu.stat"
	dir   string // the cgroup whose usage is read
	leaf  string // where the process sits (dir itself on v1)
	home  string // the cgroup.procs the process came from
	usage func() (time.Duration, error)
}

// startCPUMeter moves the process into a fresh cgroup. With neither
// cgroup v1's cpuacct nor v2 (an unusual host, or no privileges) it
// returns a meter that reports nothing, and the reason.
func startCPUMeter() (*cpuMeter, error) {
	mounts, err := mountinfo.Read()
	if err != nil {
		return &cpuMeter{}, err
	}
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return &cpuMeter{}, err
	}
	name := "warren-bench-cpu-" + ids.New(8)
	m := &cpuMeter{}
	for _, mt := range mounts {
		if mt.FSType == "cgroup" && slices.Contains(mt.SuperOptions, "cpuacct") {
			path, ok := ownCgroup(string(own), "cpuacct")
			if !ok {
				continue
			}
			home := filepath.Join(mt.MountPoint, path)
			m = &cpuMeter{kind: "cgroup v1 cpuacct", dir: filepath.Join(home, name), home: home}
			m.leaf = m.dir
			m.usage = func() (time.Duration, error) { return readCPUAcct(filepath.Join(m.dir, "cpuacct.usage")) }
			break
		}
	}
	if m.usage == nil {
		mt, ok := cgroup2Mount(mounts)
		path, okOwn := ownCgroup(string(own), "")
		if !ok || !okOwn {
			return &cpuMeter{}, errors.New("neither cgroup v1 cpuacct nor cgroup v2 is mounted")
		}
		// v2: no process may sit in a cgroup whose children get
		// controllers, so the process gets a leaf, and the runtimes put
		// sandboxes beside it.
		home := filepath.Join(mt.MountPoint, path)
		m = &cpuMeter{kind: "cgroup v2 cpu.stat", dir: filepath.Join(home, name), home: home}
		m.leaf = filepath.Join(m.dir, "bench")
		m.usage = func() (time.Duration, error) { return readCPUStat(filepath.Join(m.dir, "cpu.stat")) }
	}
	if err := os.MkdirAll(m.leaf, 0o755); err != nil {
		return &cpuMeter{}, fmt.Errorf("make the bench's cgroup: %w", err)
	}
	if err := moveProcess(m.leaf); err != nil {
		_ = removeCgroupTree(m.dir)
		return &cpuMeter{}, err
	}
	return m, nil
}

// cgroup2Mount is the unified hierarchy's mount, if there is one.
func cgroup2Mount(mounts []mountinfo.Mount) (mountinfo.Mount, bool) {
	for _, mt := range mounts {
		if mt.FSType == "cgroup2" {
			return mt, true
		}
	}
	return mountinfo.Mount{}, false
}

// ownCgroup finds the process's cgroup for controller in the contents of
// /proc/self/cgroup; controller "" is the v2 line (0::path).
func ownCgroup(procCgroup, controller string) (string, bool) {
	for _, line := range strings.Split(procCgroup, "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if controller == "" && parts[0] == "0" && parts[1] == "" {
			return parts[2], true
		}
		if controller != "" && slices.Contains(strings.Split(parts[1], ","), controller) {
			return parts[2], true
		}
	}
	return "", false
}

// moveProcess writes the process's id to dir's cgroup.procs, which moves
// all its threads; what it starts later is born there.
func moveProcess(dir string) error {
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return fmt.Errorf("move the bench into its cgroup: %w", err)
	}
	return nil
}

// ok says whether the meter accounts anything.
func (m *cpuMeter) ok() bool { return m != nil && m.usage != nil }

// sample is the cgroup's usage and the process's own CPU (user + system),
// the daemon's share.
func (m *cpuMeter) sample() (cpuSample, error) {
	total, err := m.usage()
	if err != nil {
		return cpuSample{}, err
	}
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return cpuSample{}, err
	}
	self := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return cpuSample{total: total, self: self, at: time.Now()}, nil
}

// stop moves the process back where it came from and removes the meter's
// cgroups. It runs after the daemon closed, when every sandbox's cgroup
// under it is gone.
func (m *cpuMeter) stop() error {
	if !m.ok() {
		return nil
	}
	return errors.Join(moveProcess(m.home), removeCgroupTree(m.dir))
}

// removeCgroupTree removes dir and any cgroup directories left under it,
// deepest first (a cgroup directory is removed with rmdir, never unlink).
func removeCgroupTree(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return err
	}
	var errs []error
	for _, e := range entries {
		if e.IsDir() {
			errs = append(errs, removeCgroupTree(filepath.Join(dir, e.Name())))
		}
	}
	if err := unix.Rmdir(dir); err != nil && !errors.Is(err, unix.ENOENT) {
		errs = append(errs, fmt.Errorf("remove cgroup %s: %w", dir, err))
	}
	return errors.Join(errs...)
}

// cpuSample is one reading: the cgroup's total and the process's own.
type cpuSample struct {
	total, self time.Duration
	at          time.Time
}

// readCPUAcct reads cgroup v1's cpuacct.usage (nanoseconds).
func readCPUAcct(path string) (time.Duration, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse %s: %w", path, err)
	}
	return time.Duration(ns), nil
}

// readCPUStat reads usage_usec from cgroup v2's cpu.stat.
func readCPUStat(path string) (time.Duration, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return parseCPUStat(f)
}

// parseCPUStat finds usage_usec in a cpu.stat.
func parseCPUStat(r interface{ Read([]byte) (int, error) }) (time.Duration, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if ok && k == "usage_usec" {
			us, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parse cpu.stat usage_usec: %w", err)
			}
			return time.Duration(us) * time.Microsecond, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("cpu.stat has no usage_usec")
}

// startMeter starts a meter for a suite, or one that reports nothing (and
// says why in the log) where the host has no cgroup to account in.
func startMeter(log *slog.Logger) *cpuMeter {
	m, err := startCPUMeter()
	if err != nil && log != nil {
		log.Warn("no CPU accounting for the start-cost figures", "err", err)
	}
	return m
}
