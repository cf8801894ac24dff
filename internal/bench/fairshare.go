package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/diskshare"
	"github.com/warrenhq/warren/internal/storage"
)

// FairShareReport is what fair shares of the pool cost (issue 31): creates
// and forks on a daemon with the default disk quota, the reserve's cap on
// all sandboxes and team limits set, against a daemon with all three off
// (the naive baseline) in the same run; and one run of the reserve's
// periodic step.
type FairShareReport struct {
	// CreateOff/On: POST /sandboxes until the first output of an echo.
	CreateOff Stats `json:"create_to_first_output_off"`
	CreateOn  Stats `json:"create_to_first_output_on"`
	// ForkOff/On: POST /sandboxes/{id}/fork of the live state, one fork.
	ForkOff Stats `json:"fork_off"`
	ForkOn  Stats `json:"fork_on"`
	// Ratios are on p50 / off p50.
	CreateRatio float64 `json:"create_on_vs_off_p50"`
	ForkRatio   float64 `json:"fork_on_vs_off_p50"`
	// CapUpdate: read the groups' usage and the pool's free space and set
	// the cap, with Groups quota groups in the pool (every 10 s in a
	// daemon).
	CapUpdate      Stats `json:"cap_update"`
	Groups         int   `json:"groups"`
	DefaultQuotaMB int64 `json:"default_quota_mb"`
}

// RunFairShare measures the fair-share report: opts.Creates creates and
// forks each way.
func RunFairShare(ctx context.Context, opts Options) (FairShareReport, error) {
	opts.defaults()
	var rep FairShareReport
	off, err := fairShareRound(ctx, opts, "off", func(cfg *config.Config) {
		cfg.DefaultDiskBytes, cfg.DiskReserveBytes = 0, 0
	}, nil)
	if err != nil {
		return rep, err
	}
	on, err := fairShareRound(ctx, opts, "on", func(cfg *config.Config) {
		cfg.DefaultDiskBytes, cfg.DiskReserveBytes = diskshare.Auto, diskshare.Auto
	}, &rep)
	if err != nil {
		return rep, err
	}
	rep.CreateOff, rep.ForkOff = off[0], off[1]
	rep.CreateOn, rep.ForkOn = on[0], on[1]
	rep.CreateRatio = round2(rep.CreateOn.P50 / rep.CreateOff.P50)
	rep.ForkRatio = round2(rep.ForkOn.P50 / rep.ForkOff.P50)
	return rep, nil
}

// fairShareRound times creates and forks on one daemon configured by tune;
// with rep (fair shares on) it also sets the admin team's limits, so that
// every create runs their check, and times the cap's update.
func fairShareRound(ctx context.Context, opts Options, name string, tune func(*config.Config), rep *FairShareReport) (_ [2]Stats, retErr error) {
	o := opts
	o.DataDir = filepath.Join(opts.DataDir, name)
	h, err := startHarness(ctx, o, func(cfg *config.Config) {
		cfg.ImageSize = 4 << 30
		cfg.MaxSandboxes = 2*opts.Creates + 20
		tune(cfg)
	})
	if err != nil {
		return [2]Stats{}, err
	}
	defer func() { retErr = errors.Join(retErr, h.close()) }()
	c := h.c
	if rep != nil {
		// Limits far above what the run uses: the check runs, never refuses.
		if _, err := c.Teams.SetLimits(ctx, "admin", client.TeamLimits{Sandboxes: 10000, MemoryMB: 1 << 30, CPUCount: 100000, DiskMB: 1 << 30}); err != nil {
			return [2]Stats{}, err
		}
	}
	var created, forked []time.Duration
	var ids []string
	for i := 0; i <= opts.Creates; i++ {
		start := time.Now()
		sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: h.tmpl})
		if err != nil {
			return [2]Stats{}, fmt.Errorf("create: %w", err)
		}
		fw := &firstWrite{}
		if _, err := c.Commands.Exec(ctx, sb.SandboxID, client.ExecRequest{Cmd: []string{"echo", "ready"}}, fw, io.Discard); err != nil {
			return [2]Stats{}, fmt.Errorf("first exec: %w", err)
		}
		ids = append(ids, sb.SandboxID)
		if i == 0 {
			continue // warms caches
		}
		created = append(created, fw.at.Sub(start))
	}
	for i := 0; i <= opts.Creates; i++ {
		start := time.Now()
		forks, err := c.Snapshots.Fork(ctx, ids[0], client.ForkRequest{})
		if err != nil || len(forks) != 1 || forks[0].Sandbox == nil {
			return [2]Stats{}, fmt.Errorf("fork: %+v %w", forks, err)
		}
		took := time.Since(start)
		if err := c.Sandboxes.Delete(ctx, forks[0].Sandbox.SandboxID); err != nil {
			return [2]Stats{}, fmt.Errorf("delete fork: %w", err)
		}
		if i > 0 {
			forked = append(forked, took)
		}
	}
	if rep != nil {
		det, err := c.Sandboxes.Get(ctx, ids[0])
		if err != nil {
			return [2]Stats{}, err
		}
		rep.DefaultQuotaMB = det.DiskSizeMB
		if rep.CapUpdate, rep.Groups, err = timeCapUpdate(ctx, h.d.Storage, len(ids), opts.Creates*10); err != nil {
			return [2]Stats{}, err
		}
	}
	return [2]Stats{Summarise(created), Summarise(forked)}, nil
}

// timeCapUpdate times what the reserve's loop does every 10 s.
func timeCapUpdate(ctx context.Context, st storage.Storage, groups, n int) (Stats, int, error) {
	pool, ok := st.(storage.GroupsCap)
	if !ok {
		return Stats{}, 0, fmt.Errorf("the %s storage cannot cap groups", st.Name())
	}
	const reserve = 256 << 20
	samples, err := timeN(n, func() error {
		used, _, err := pool.GroupsUsage(ctx)
		if err != nil {
			return err
		}
		_, avail, err := pool.Space(ctx)
		if err != nil {
			return err
		}
		return pool.SetGroupsCap(ctx, diskshare.CapFor(used, avail, reserve))
	})
	return Summarise(samples), groups, err
}
