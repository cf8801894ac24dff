package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/runtime"
)

// DensityReport is the memory cost of idle sandboxes.
type DensityReport struct {
	Sandboxes int     `json:"sandboxes"`
	CreateAll float64 `json:"create_all_s"`
	// Per idle sandbox, in MiB: its agent's proportional set size (shared
	// binary pages split between the agents that map them), the daemon's
	// growth divided by the sandboxes, and the sandbox's cgroup memory.
	AgentPSSMiB      float64 `json:"agent_pss_mib_per_sandbox"`
	DaemonGrowthMiB  float64 `json:"daemon_pss_growth_mib_per_sandbox"`
	PerSandboxMiB    float64 `json:"total_mib_per_sandbox"`
	CgroupMemoryMiB  float64 `json:"cgroup_memory_mib_per_sandbox"`
	TargetPerSandbox float64 `json:"target_mib_per_sandbox"`
	Met              bool    `json:"met"`
}

// RunDensity starts n idle sandboxes and measures what each costs.
func RunDensity(ctx context.Context, opts Options, n int) (_ DensityReport, retErr error) {
	if n <= 0 {
		n = 200
	}
	h, err := startHarness(ctx, opts, func(c *config.Config) {
		c.MaxSandboxes = n + 4
		c.ImageSize = 8 << 30
	})
	if err != nil {
		return DensityReport{}, err
	}
	defer func() {
		if err := h.close(); err != nil && retErr == nil {
			retErr = err
		}
	}()
	rep := DensityReport{Sandboxes: n, TargetPerSandbox: 3}
	before, err := pssKiB(os.Getpid())
	if err != nil {
		return rep, err
	}
	var made []string
	defer func() {
		for _, id := range made {
			_ = h.c.Sandboxes.Delete(context.WithoutCancel(ctx), id)
		}
	}()
	never := int64(0)
	start := time.Now()
	for i := 0; i < n; i++ {
		sb, err := h.c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: h.tmpl, Timeout: &never})
		if err != nil {
			return rep, fmt.Errorf("create sandbox %d: %w", i+1, err)
		}
		made = append(made, sb.SandboxID)
	}
	rep.CreateAll = time.Since(start).Seconds()
	time.Sleep(3 * time.Second) // let the agents and the daemon settle
	after, err := pssKiB(os.Getpid())
	if err != nil {
		return rep, err
	}
	var agents, cg float64
	stats, _ := h.d.Runtime.(runtime.StatsReader)
	for _, id := range made {
		st, err := h.d.Runtime.Status(ctx, id)
		if err != nil {
			return rep, err
		}
		kib, err := pssKiB(st.InitPID)
		if err != nil {
			return rep, err
		}
		agents += float64(kib)
		if stats != nil {
			if s, err := stats.Stats(ctx, id); err == nil {
				cg += float64(s.MemoryBytes)
			}
		}
	}
	rep.AgentPSSMiB = round2(agents / float64(n) / 1024)
	rep.DaemonGrowthMiB = round2(float64(after-before) / float64(n) / 1024)
	rep.PerSandboxMiB = round2(rep.AgentPSSMiB + rep.DaemonGrowthMiB)
	rep.CgroupMemoryMiB = round2(cg / float64(n) / (1 << 20))
	rep.Met = rep.PerSandboxMiB <= rep.TargetPerSandbox
	return rep, nil
}

// pssKiB reads a process's proportional set size.
func pssKiB(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Pss:"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("no Pss in smaps_rollup of %d", pid)
}
