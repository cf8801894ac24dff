package native

import (
	"context"
	"fmt"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/runtime"
)

// UpdateLimits changes a running sandbox's memory, CPU and pids limits in
// place (its cgroups), as `runc update` does. Zero fields keep their value.
// Lowering memory below what the sandbox uses fails with the kernel's EBUSY.
func (r *Runtime) UpdateLimits(ctx context.Context, id string, l runtime.Limits) error {
	unlock := r.locks.Lock(id)
	defer unlock()
	c, err := r.load(id)
	if err != nil {
		return err
	}
	cfg := c.Config()
	res := cfg.Cgroups.Resources
	if res == nil {
		return fmt.Errorf("sandbox %s has no cgroup resources to update: %w", id, errdefs.ErrUnsupported)
	}
	if l.MemoryBytes > 0 {
		res.Memory = l.MemoryBytes
		if r.host.swapLimit {
			res.MemorySwap = l.MemoryBytes
		}
	}
	if l.CPUMillis > 0 {
		res.CpuQuota = l.CPUMillis * cpuPeriod / 1000
		res.CpuPeriod = uint64(cpuPeriod)
	}
	if l.Pids > 0 {
		res.PidsLimit = &l.Pids
	}
	if err := c.Set(cfg); err != nil {
		return fmt.Errorf("sandbox %s: update limits: %w", id, err)
	}
	return nil
}
