package client

import "time"

// SandboxMetric is one element of GET /sandboxes/{id}/metrics: one reading
// of a sandbox's resources, in E2B's shape. Samples are taken once a second
// and kept for an hour while the sandbox runs.
type SandboxMetric struct {
	Timestamp     time.Time `json:"timestamp"`
	TimestampUnix int64     `json:"timestampUnix"`
	// CPUCount is the CPUs the sandbox may use (its quota rounded up).
	CPUCount int `json:"cpuCount"`
	// CPUUsedPct is the CPU time used over the last second, in percent of
	// the sandbox's quota (0–100).
	CPUUsedPct float64 `json:"cpuUsedPct"`
	// MemUsed is the memory in use, without reclaimable page cache;
	// MemTotal is the sandbox's memory limit.
	MemUsed  int64 `json:"memUsed"`
	MemTotal int64 `json:"memTotal"`
	// DiskUsed is the space charged to the sandbox (-1 when the storage
	// cannot tell); DiskTotal its disk quota (0 = none or unknown).
	DiskUsed  int64 `json:"diskUsed"`
	DiskTotal int64 `json:"diskTotal"`
	// warren extensions
	Pids      int64 `json:"pids"`
	PidsLimit int64 `json:"pidsLimit"`
}

// PoolUsage is the fill level of the filesystem holding the storage pool,
// in GET /health.
type PoolUsage struct {
	UsedBytes  int64   `json:"usedBytes"`
	TotalBytes int64   `json:"totalBytes"`
	UsedPct    float64 `json:"usedPct"`
}
