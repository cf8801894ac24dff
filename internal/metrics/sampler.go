// Package metrics measures warren: a sampler that reads every live
// sandbox's counters once a second and keeps a bounded history of each, the
// API's latency histograms, the storage pool's fill level, and the
// Prometheus exposition of all of it. It decides nothing; the server
// serves what it holds.
package metrics

import (
	"context"
	"log/slog"
	"math"
	goruntime "runtime"
	"sync"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/runtime"
)

// Sample is one reading of a sandbox, in the shape of E2B's sandbox
// metrics (plus pids, which E2B does not report).
type Sample struct {
	At         time.Time
	CPUCount   int     // CPUs the sandbox may use (its quota rounded up)
	CPUUsedPct float64 // percent of CPUCount's worth of CPU time, 0–100
	MemUsed    int64
	MemTotal   int64 // the memory limit
	DiskUsed   int64 // -1 when the storage cannot tell
	DiskTotal  int64 // the disk quota; 0 when unknown or none
	Pids       int64
	PidsLimit  int64
}

// SamplerConfig configures a Sampler.
type SamplerConfig struct {
	// Interval between readings (default 1 s).
	Interval time.Duration
	// Keep is how many samples are kept per sandbox (default 3600: an hour
	// at one a second).
	Keep int
	// IDs lists the sandboxes to read (the runtime's List).
	IDs func(ctx context.Context) ([]string, error)
	// Stats reads one sandbox's counters.
	Stats runtime.StatsReader
	// Disk reports the space charged to a sandbox and its cap; nil when the
	// storage cannot tell (samples then carry -1, 0).
	Disk func(ctx context.Context, id string) (used, limit int64, err error)
	// DiskEvery reads disk usage every n-th interval only (default 5): it
	// changes slowly and costs more than the cgroup files.
	DiskEvery int
	// HostCPUs is the CPU count of a sandbox without a CPU quota (default
	// the host's).
	HostCPUs int
	Log      *slog.Logger
}

// Sampler keeps a bounded history of samples per live sandbox.
type Sampler struct {
	cfg SamplerConfig

	mu    sync.Mutex
	boxes map[string]*box
	tick  int
}

type box struct {
	prev      runtime.Stats
	hasPrev   bool
	samples   *ring
	disk      int64
	diskLimit int64
	diskRead  bool
}

// NewSampler fills cfg's defaults and returns a sampler; call Run.
func NewSampler(cfg SamplerConfig) *Sampler {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.Keep <= 0 {
		cfg.Keep = 3600
	}
	if cfg.DiskEvery <= 0 {
		cfg.DiskEvery = 5
	}
	if cfg.HostCPUs <= 0 {
		cfg.HostCPUs = goruntime.NumCPU()
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Sampler{cfg: cfg, boxes: map[string]*box{}}
}

// Run samples every interval until ctx is done.
func (s *Sampler) Run(ctx context.Context) {
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		s.SampleOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// SampleOnce reads every live sandbox once. A sandbox's first reading only
// primes its CPU counter: a percentage needs two readings.
func (s *Sampler) SampleOnce(ctx context.Context) {
	if s.cfg.IDs == nil || s.cfg.Stats == nil {
		return
	}
	ids, err := s.cfg.IDs(ctx)
	if err != nil {
		s.cfg.Log.Warn("metrics: list sandboxes", "err", err)
		return
	}
	s.mu.Lock()
	s.tick++
	readDisk := s.tick%s.cfg.DiskEvery == 1 || s.cfg.DiskEvery == 1
	s.mu.Unlock()

	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		st, err := s.cfg.Stats.Stats(ctx, id)
		if err != nil {
			if !errdefs.IsNotFound(err) {
				s.cfg.Log.Debug("metrics: read sandbox stats", "sandbox", id, "err", err)
			}
			continue
		}
		seen[id] = true
		s.mu.Lock()
		b := s.boxes[id]
		if b == nil {
			b = &box{samples: newRing(s.cfg.Keep), disk: -1}
			s.boxes[id] = b
		}
		needDisk := readDisk || !b.diskRead
		s.mu.Unlock()
		// Disk is read outside the lock: it may be an ioctl on the pool.
		var used, limit int64 = -1, 0
		if needDisk && s.cfg.Disk != nil {
			if u, l, err := s.cfg.Disk(ctx, id); err == nil {
				used, limit = u, l
			}
		}
		s.mu.Lock()
		if needDisk {
			b.disk, b.diskLimit, b.diskRead = used, limit, true
		}
		if b.hasPrev {
			b.samples.push(s.sample(b.prev, st, b.disk, b.diskLimit))
		}
		b.prev, b.hasPrev = st, true
		s.mu.Unlock()
	}
	// Forget sandboxes that are gone (or stopped: their cgroup is).
	s.mu.Lock()
	for id := range s.boxes {
		if !seen[id] {
			delete(s.boxes, id)
		}
	}
	s.mu.Unlock()
}

// sample turns two readings into a Sample.
func (s *Sampler) sample(prev, cur runtime.Stats, disk, diskLimit int64) Sample {
	cpus := float64(cur.CPULimitMillis) / 1000
	if cpus <= 0 {
		cpus = float64(s.cfg.HostCPUs)
	}
	return Sample{
		At:         cur.At,
		CPUCount:   int(math.Ceil(cpus)),
		CPUUsedPct: CPUPercent(prev, cur, cpus),
		MemUsed:    cur.MemoryBytes,
		MemTotal:   cur.MemoryLimit,
		DiskUsed:   disk,
		DiskTotal:  diskLimit,
		Pids:       cur.Pids,
		PidsLimit:  cur.PidsLimit,
	}
}

// CPUPercent is the share of cpus' worth of CPU time used between two
// readings, in percent (0–100, two decimals). A counter that went backwards
// (a rolled-back sandbox's new cgroup) or no elapsed time reads as 0.
func CPUPercent(prev, cur runtime.Stats, cpus float64) float64 {
	wall := cur.At.Sub(prev.At)
	if wall <= 0 || cpus <= 0 || cur.CPUUsageNanos < prev.CPUUsageNanos {
		return 0
	}
	used := float64(cur.CPUUsageNanos - prev.CPUUsageNanos)
	pct := used / float64(wall.Nanoseconds()) / cpus * 100
	return math.Round(min(pct, 100)*100) / 100
}

// Range returns id's samples taken in [start, end] (a zero end = no
// bound), oldest first.
func (s *Sampler) Range(id string, start, end time.Time) []Sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []Sample{}
	b := s.boxes[id]
	if b == nil {
		return out
	}
	for i := 0; i < b.samples.n; i++ {
		smp := b.samples.at(i)
		if smp.At.Before(start) || (!end.IsZero() && smp.At.After(end)) {
			continue
		}
		out = append(out, smp)
	}
	return out
}

// Latest returns every sampled sandbox's newest sample.
func (s *Sampler) Latest() map[string]Sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]Sample, len(s.boxes))
	for id, b := range s.boxes {
		if smp, ok := b.samples.last(); ok {
			out[id] = smp
		}
	}
	return out
}

// Live is how many sandboxes the last pass could read.
func (s *Sampler) Live() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.boxes)
}
