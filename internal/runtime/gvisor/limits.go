package gvisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/runtime"
)

var _ runtime.StatsReader = (*Runtime)(nil)

// limiter changes a running sandbox's limits and reads its counters.
type limiter struct {
	*core
	host hostFacts
}

// limitsFile keeps a sandbox's current limits (the user's numbers, not the
// host backstops derived from them) in its bundle.
func (b bundles) limitsFile(id string) string { return filepath.Join(b.bundle(id), "limits.json") }

func (b bundles) writeLimits(id string, l runtime.Limits) error {
	data, err := json.Marshal(l)
	if err != nil {
		return err
	}
	tmp := b.limitsFile(id) + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, b.limitsFile(id))
}

func (b bundles) readLimits(id string) (runtime.Limits, error) {
	var l runtime.Limits
	data, err := os.ReadFile(b.limitsFile(id))
	if errors.Is(err, os.ErrNotExist) {
		return l, fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	if err != nil {
		return l, err
	}
	if err := json.Unmarshal(data, &l); err != nil {
		return l, fmt.Errorf("parse %s: %w", b.limitsFile(id), err)
	}
	return l, nil
}

// UpdateLimits changes a sandbox's memory, CPU and pids limits in place.
// Zero fields keep their value. The host cgroups change through `runsc
// update`, gVisor's own cgroupfs (what the sandbox reads and, for pids,
// where the sandbox reads its limits) through runsc write-control for memory
// and CPU, and through warren-gvisor-init run in the sandbox for pids (it
// also sets every process's RLIMIT_NPROC, which enforces it). runsc
// changes a running sandbox only: a paused one is ErrConflict. Lowering
// memory below what the sandbox uses fails with the kernel's EBUSY.
//
// Caveat: in this runsc, PID 1 and every process `runsc exec` starts share
// one rlimit set, which each exec resets to the bundle's values; the exec
// here sets it right again, but any other `runsc exec` (warren itself never
// runs one) puts PID 1's RLIMIT_NPROC back to the limit the sandbox started
// with. Processes PID 1 forks have their own copy.
func (lm *limiter) UpdateLimits(ctx context.Context, id string, l runtime.Limits) error {
	if l.MemoryBytes < 0 || l.CPUMillis < 0 || l.Pids < 0 || (l.CPUMillis > 0 && l.CPUMillis < 10) {
		return fmt.Errorf("sandbox %s: invalid limits %+v: %w", id, l, errdefs.ErrInvalid)
	}
	unlock := lm.locks.Lock(id)
	defer unlock()
	st, err := lm.status(ctx, id)
	if err != nil {
		return err
	}
	if st.State != runtime.StateRunning {
		return fmt.Errorf("sandbox %s is %s; the gvisor runtime changes the limits of a running sandbox only: %w", id, st.State, errdefs.ErrConflict)
	}
	cur, err := lm.bundles.readLimits(id)
	if err != nil {
		return err
	}
	next := cur
	args := []string{"update"}
	if l.MemoryBytes > 0 {
		next.MemoryBytes = l.MemoryBytes
		args = append(args, "--memory="+strconv.FormatInt(l.MemoryBytes, 10))
		if lm.host.swapLimit {
			args = append(args, "--memory-swap="+strconv.FormatInt(l.MemoryBytes, 10))
		}
	}
	if l.CPUMillis > 0 {
		next.CPUMillis = l.CPUMillis
		args = append(args, "--cpu-quota="+strconv.FormatInt(l.CPUMillis*cpuPeriod/1000, 10), "--cpu-period="+strconv.Itoa(cpuPeriod))
	}
	if l.Pids > 0 {
		next.Pids = l.Pids
		args = append(args, "--pids-limit="+strconv.FormatInt(hostPidsLimit(l.Pids), 10))
	}
	if len(args) == 1 {
		return nil
	}
	if l.MemoryBytes > 0 && lm.host.swapLimit && !lm.host.unified && l.MemoryBytes < cur.MemoryBytes {
		// cgroup v1 refuses memory+swap below memory, and memory above
		// memory+swap: lower memory first, then memory+swap.
		if _, err := lm.runsc.out(ctx, "update", "--memory="+strconv.FormatInt(l.MemoryBytes, 10), id); err != nil {
			return fmt.Errorf("sandbox %s: update limits: %w", id, err)
		}
	}
	if _, err := lm.runsc.out(ctx, append(args, id)...); err != nil {
		return fmt.Errorf("sandbox %s: update limits: %w", id, err)
	}
	inside := func(ctrl, file, val string) error {
		if _, err := lm.runsc.out(ctx, "write-control", id, ctrl, "/"+id, file, val); err != nil {
			return fmt.Errorf("sandbox %s: show the new %s limit inside: %w", id, ctrl, err)
		}
		return nil
	}
	if l.MemoryBytes > 0 {
		if err := inside("memory", "memory.limit_in_bytes", strconv.FormatInt(l.MemoryBytes, 10)); err != nil {
			return err
		}
	}
	if l.CPUMillis > 0 {
		if err := inside("cpu", "cpu.cfs_quota_us", strconv.FormatInt(l.CPUMillis*cpuPeriod/1000, 10)); err != nil {
			return err
		}
	}
	if l.Pids > 0 {
		// Raising RLIMIT_NPROC needs CAP_SYS_RESOURCE, which only this
		// process gets.
		if _, err := lm.runsc.out(ctx, "exec", "--cap=CAP_SYS_RESOURCE", id, InitPath, "--pids-max", strconv.FormatInt(l.Pids, 10)); err != nil {
			return fmt.Errorf("sandbox %s: set its pids limit inside: %w", id, err)
		}
	}
	return lm.bundles.writeLimits(id, next)
}

// Stats reads id's counters from gVisor (runsc events --stats): CPU time
// of the whole sandbox (host cgroup), the memory its processes use and
// their number as gVisor's kernel counts them, beside the user's limits.
func (lm *limiter) Stats(ctx context.Context, id string) (runtime.Stats, error) {
	lim, err := lm.bundles.readLimits(id)
	if err != nil {
		return runtime.Stats{}, err
	}
	out, err := lm.runsc.out(ctx, "events", "--stats", id)
	if err != nil {
		if isNotExist(err) || isStopped(err) {
			return runtime.Stats{}, fmt.Errorf("sandbox %s is not running: %w", id, errdefs.ErrNotFound)
		}
		return runtime.Stats{}, fmt.Errorf("sandbox %s: read stats: %w", id, err)
	}
	var ev struct {
		Data struct {
			CPU struct {
				Usage struct {
					Total uint64 `json:"total"`
				} `json:"usage"`
			} `json:"cpu"`
			Memory struct {
				Usage struct {
					Usage int64 `json:"usage"`
				} `json:"usage"`
			} `json:"memory"`
			Pids struct {
				Current int64 `json:"current"`
			} `json:"pids"`
		} `json:"data"`
	}
	if err := json.Unmarshal(out, &ev); err != nil {
		return runtime.Stats{}, fmt.Errorf("sandbox %s: parse runsc events: %w", id, err)
	}
	return runtime.Stats{
		CPUUsageNanos:  ev.Data.CPU.Usage.Total,
		CPULimitMillis: lim.CPUMillis,
		MemoryBytes:    ev.Data.Memory.Usage.Usage,
		MemoryLimit:    lim.MemoryBytes,
		Pids:           ev.Data.Pids.Current,
		PidsLimit:      lim.Pids,
		At:             time.Now(),
	}, nil
}

func isStopped(err error) bool {
	var re *runscError
	return errors.As(err, &re) && (strings.Contains(re.msg, "in state stopped") || strings.Contains(re.msg, "in state created"))
}
