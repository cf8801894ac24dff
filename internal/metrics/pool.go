package metrics

import (
	"fmt"
	"math"

	"golang.org/x/sys/unix"
)

// Pool is the fill level of the filesystem holding the storage pool.
type Pool struct {
	UsedBytes  int64
	TotalBytes int64
	UsedPct    float64 // 0–100, two decimals
}

// StatPool reads the fill level of the filesystem at path. It is a statfs,
// cheap enough to call on every health check. On btrfs the numbers are the
// allocator's estimate (what df shows), good enough for a threshold.
func StatPool(path string) (Pool, error) {
	var fs unix.Statfs_t
	if err := unix.Statfs(path, &fs); err != nil {
		return Pool{}, fmt.Errorf("statfs %s: %w", path, err)
	}
	bs := int64(fs.Bsize)
	p := Pool{TotalBytes: int64(fs.Blocks) * bs, UsedBytes: int64(fs.Blocks-fs.Bfree) * bs}
	if p.TotalBytes > 0 {
		p.UsedPct = math.Round(float64(p.UsedBytes)/float64(p.TotalBytes)*10000) / 100
	}
	return p, nil
}

// Health statuses, from the pool's fill level: a full pool makes every
// write in every sandbox fail, so it is the host's health.
const (
	StatusOK        = "ok"
	StatusDegraded  = "degraded"  // pool ≥ 85 % used
	StatusUnhealthy = "unhealthy" // pool ≥ 95 % used
)

// PoolStatus maps a pool fill level (percent) to a health status.
func PoolStatus(usedPct float64) string {
	switch {
	case usedPct >= 95:
		return StatusUnhealthy
	case usedPct >= 85:
		return StatusDegraded
	}
	return StatusOK
}
