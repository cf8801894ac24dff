package bench

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"sync/atomic"
	"time"

	"github.com/warrenhq/warren/client"
)

// StartCost is what starting sandboxes costs the host, not how long one
// start takes: the CPU of a create → first output → delete cycle, one at a
// time and with enough at once to keep every core busy, and how many such
// cycles the host completes per second at saturation. A cycle's CPU is
// the cgroup the bench's process and everything it starts sit in (the
// daemon, the runtime's init, the agent, runsc); DaemonCPUMsPerCreate is
// the bench's process alone (the daemon, plus the bench's client, a small
// share), SandboxCPUMsPerCreate the rest.
type StartCost struct {
	// Accounting names where the CPU figures come from; empty when the
	// host offers neither (then only CreatesPerSecond is measured).
	Accounting string `json:"accounting,omitempty"`
	Creates    int    `json:"creates"`
	// CPUMsPerCreate and its split, one cycle at a time.
	CPUMsPerCreate        float64 `json:"cpu_ms_per_create"`
	DaemonCPUMsPerCreate  float64 `json:"daemon_cpu_ms_per_create"`
	SandboxCPUMsPerCreate float64 `json:"sandbox_cpu_ms_per_create"`
	// Concurrent cycles at once for the saturation figures.
	Concurrent int `json:"concurrent"`
	// CreatesPerSecond: cycles completed per second of wall time with
	// Concurrent in flight; CPUMsPerCreateSaturated their CPU each;
	// CoresBusy the CPU used per second of wall time meanwhile.
	CreatesPerSecond        float64 `json:"creates_per_second"`
	CPUMsPerCreateSaturated float64 `json:"cpu_ms_per_create_saturated"`
	CoresBusy               float64 `json:"cores_busy"`
}

// measureStartCost runs opts.Creates cycles of create → first output →
// delete of in, one after another, then as many (at least 4 per worker)
// with opts.StartConcurrent at once, reading meter around each.
func measureStartCost(ctx context.Context, c *client.Client, in client.NewSandbox, m *cpuMeter, opts Options) (StartCost, error) {
	n, concurrent := opts.Creates, opts.StartConcurrent
	out := StartCost{Creates: n, Concurrent: concurrent}
	if m.ok() {
		out.Accounting = m.kind
	}
	cycle := func() error { _, err := createToFirstOutput(ctx, c, in, true); return err }
	if err := cycle(); err != nil { // warms caches, as every suite's first sample
		return out, err
	}
	stopProfile, err := startProfile(opts.StartProfile)
	if err != nil {
		return out, err
	}
	before, err := m.read()
	if err != nil {
		return out, err
	}
	for range n {
		if err := cycle(); err != nil {
			return out, err
		}
	}
	after, err := m.read()
	if perr := stopProfile(); err == nil {
		err = perr
	}
	if err != nil {
		return out, err
	}
	out.CPUMsPerCreate, out.DaemonCPUMsPerCreate, out.SandboxCPUMsPerCreate = perCreate(before, after, n)

	total := max(n, 4*concurrent)
	if before, err = m.read(); err != nil {
		return out, err
	}
	var left atomic.Int64
	left.Store(int64(total))
	_, err = together(concurrent, func(int) (time.Duration, error) {
		for left.Add(-1) >= 0 {
			if err := cycle(); err != nil {
				return 0, err
			}
		}
		return 0, nil
	})
	if err != nil {
		return out, fmt.Errorf("%d at once: %w", concurrent, err)
	}
	if after, err = m.read(); err != nil {
		return out, err
	}
	wall := after.at.Sub(before.at)
	out.CreatesPerSecond = round2(float64(total) / wall.Seconds())
	out.CPUMsPerCreateSaturated, _, _ = perCreate(before, after, total)
	if m.ok() {
		out.CoresBusy = round2(float64(after.total-before.total) / float64(wall))
	}
	return out, nil
}

// startProfile starts a Go CPU profile into path, if set, and returns what
// stops it.
func startProfile(path string) (func() error, error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() error { pprof.StopCPUProfile(); return f.Close() }, nil
}

// read samples the meter; a meter that accounts nothing gives the time
// alone.
func (m *cpuMeter) read() (cpuSample, error) {
	if !m.ok() {
		return cpuSample{at: time.Now()}, nil
	}
	return m.sample()
}

// perCreate divides the CPU between two samples by n cycles: the total,
// the process's own and the rest, in milliseconds.
func perCreate(before, after cpuSample, n int) (total, daemon, sandbox float64) {
	ms := func(d time.Duration) float64 { return round2(float64(d) / float64(time.Millisecond) / float64(n)) }
	t, s := after.total-before.total, after.self-before.self
	if t == 0 {
		return 0, 0, 0
	}
	return ms(t), ms(s), ms(t - s)
}
