package native

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/runtime"
)

var _ runtime.StatsReader = (*Runtime)(nil)

// Stats reads id's cgroup counters. It reads the few files it needs rather
// than calling libcontainer's GetStats, which parses every controller's
// files (blkio, hugetlb, per-CPU usage) and is run once a second per sandbox
// by the metrics sampler.
//
// The cgroup directories come from the sandbox's saved state, not from our
// own cgroup, so a sandbox started by an earlier daemon in another cgroup
// is read correctly.
func (r *Runtime) Stats(ctx context.Context, id string) (runtime.Stats, error) {
	f, err := r.factsOf(id)
	if err != nil {
		return runtime.Stats{}, fmt.Errorf("sandbox %s: read state: %w", id, err)
	}
	// A hybrid host (v1 controllers plus an empty v2 hierarchy) lists both;
	// the v1 memory controller says where the counters are.
	var s runtime.Stats
	if _, v1 := f.cgroupPaths["memory"]; v1 {
		s, err = statsV1(f.cgroupPaths)
	} else if dir, ok := f.cgroupPaths[""]; ok {
		s, err = statsV2(dir)
	} else {
		err = fmt.Errorf("no memory cgroup in the sandbox's state")
	}
	if errors.Is(err, os.ErrNotExist) {
		return runtime.Stats{}, fmt.Errorf("sandbox %s has no cgroup (stopped?): %w", id, errdefs.ErrNotFound)
	}
	if err != nil {
		return runtime.Stats{}, fmt.Errorf("sandbox %s: read cgroup stats: %w", id, err)
	}
	s.At = time.Now()
	return s, nil
}

var _ runtime.DirtyReader = (*Runtime)(nil)

// DirtyBytes reads the page cache id's processes have dirtied and that is
// not written back yet (dirty plus under writeback), from its memory
// cgroup: v1's hierarchical total_* counters or v2's file_* ones.
func (r *Runtime) DirtyBytes(ctx context.Context, id string) (int64, error) {
	f, err := r.factsOf(id)
	if err != nil {
		return 0, fmt.Errorf("sandbox %s: read state: %w", id, err)
	}
	stat, dirty, writeback := "", "file_dirty", "file_writeback"
	if mem, v1 := f.cgroupPaths["memory"]; v1 {
		stat, dirty, writeback = filepath.Join(mem, "memory.stat"), "total_dirty", "total_writeback"
	} else if dir, ok := f.cgroupPaths[""]; ok {
		stat = filepath.Join(dir, "memory.stat")
	} else {
		return 0, fmt.Errorf("sandbox %s: no memory cgroup in its state", id)
	}
	fields, err := statFields(stat, dirty, writeback)
	if errors.Is(err, os.ErrNotExist) {
		return 0, fmt.Errorf("sandbox %s has no cgroup (stopped?): %w", id, errdefs.ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("sandbox %s: read memory.stat: %w", id, err)
	}
	return fields[0] + fields[1], nil
}

// statsV1 reads the per-controller hierarchies of cgroup v1.
func statsV1(paths map[string]string) (runtime.Stats, error) {
	var s runtime.Stats
	var err error
	dir := func(ctrl string) (string, error) {
		p, ok := paths[ctrl]
		if !ok {
			return "", fmt.Errorf("the %s controller is not in the sandbox's cgroup paths", ctrl)
		}
		return p, nil
	}
	acct, err := dir("cpuacct")
	if err != nil {
		return s, err
	}
	if s.CPUUsageNanos, err = readUint(filepath.Join(acct, "cpuacct.usage")); err != nil {
		return s, err
	}
	if cpu, err := dir("cpu"); err == nil {
		quota, qerr := readInt(filepath.Join(cpu, "cpu.cfs_quota_us"))
		period, perr := readInt(filepath.Join(cpu, "cpu.cfs_period_us"))
		if qerr == nil && perr == nil {
			s.CPULimitMillis = quotaMillis(quota, period)
		}
	}
	mem, err := dir("memory")
	if err != nil {
		return s, err
	}
	usage, err := readInt(filepath.Join(mem, "memory.usage_in_bytes"))
	if err != nil {
		return s, err
	}
	inactive, err := statField(filepath.Join(mem, "memory.stat"), "total_inactive_file")
	if err != nil {
		return s, err
	}
	s.MemoryBytes = max(usage-inactive, 0)
	limit, err := readInt(filepath.Join(mem, "memory.limit_in_bytes"))
	if err != nil {
		return s, err
	}
	s.MemoryLimit = v1Limit(limit)
	pids, err := dir("pids")
	if err != nil {
		return s, err
	}
	if s.Pids, err = readInt(filepath.Join(pids, "pids.current")); err != nil {
		return s, err
	}
	s.PidsLimit, err = readMax(filepath.Join(pids, "pids.max"))
	return s, err
}

// statsV2 reads one unified cgroup directory.
func statsV2(dir string) (runtime.Stats, error) {
	var s runtime.Stats
	usec, err := statField(filepath.Join(dir, "cpu.stat"), "usage_usec")
	if err != nil {
		return s, err
	}
	s.CPUUsageNanos = uint64(usec) * 1000
	if b, err := os.ReadFile(filepath.Join(dir, "cpu.max")); err == nil {
		// "max 100000" or "<quota> <period>"
		f := strings.Fields(string(b))
		if len(f) == 2 && f[0] != "max" {
			q, qerr := strconv.ParseInt(f[0], 10, 64)
			p, perr := strconv.ParseInt(f[1], 10, 64)
			if qerr == nil && perr == nil {
				s.CPULimitMillis = quotaMillis(q, p)
			}
		}
	}
	usage, err := readInt(filepath.Join(dir, "memory.current"))
	if err != nil {
		return s, err
	}
	inactive, err := statField(filepath.Join(dir, "memory.stat"), "inactive_file")
	if err != nil {
		return s, err
	}
	s.MemoryBytes = max(usage-inactive, 0)
	if s.MemoryLimit, err = readMax(filepath.Join(dir, "memory.max")); err != nil {
		return s, err
	}
	if s.Pids, err = readInt(filepath.Join(dir, "pids.current")); err != nil {
		return s, err
	}
	s.PidsLimit, err = readMax(filepath.Join(dir, "pids.max"))
	return s, err
}

// quotaMillis turns a CFS quota and period (µs) into thousandths of a CPU;
// a negative quota is "no quota" (0).
func quotaMillis(quota, period int64) int64 {
	if quota <= 0 || period <= 0 {
		return 0
	}
	return quota * 1000 / period
}

// v1Limit maps cgroup v1's "unlimited" (a page-rounded MaxInt64) to 0.
func v1Limit(n int64) int64 {
	if n >= math.MaxInt64/2 {
		return 0
	}
	return n
}

func readString(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

func readUint(path string) (uint64, error) {
	s, err := readString(path)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse %s: %w", path, err)
	}
	return n, nil
}

func readInt(path string) (int64, error) {
	s, err := readString(path)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse %s: %w", path, err)
	}
	return n, nil
}

// readMax reads a limit file that holds a number or "max" (0).
func readMax(path string) (int64, error) {
	s, err := readString(path)
	if err != nil {
		return 0, err
	}
	if s == "max" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse %s: %w", path, err)
	}
	return n, nil
}

// statField returns the value of key in a "key value" per line file
// (memory.stat, cpu.stat); a missing key reads as 0.
func statField(path, key string) (int64, error) {
	v, err := statFields(path, key)
	if err != nil {
		return 0, err
	}
	return v[0], nil
}

// statFields is statField for several keys of one file, read once.
func statFields(path string, keys ...string) ([]int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := make([]int64, len(keys))
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		for i, key := range keys {
			if k == key {
				n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				if err != nil {
					return nil, fmt.Errorf("parse %s in %s: %w", key, path, err)
				}
				out[i] = n
			}
		}
	}
	return out, sc.Err()
}
