package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/mountinfo"
	"github.com/warrenhq/warren/internal/network"
	"github.com/warrenhq/warren/internal/sandbox"
)

// Teardown stops every sandbox of a data directory (their processes,
// cgroups, runtime state and networks: veths, namespaces, warren's
// nftables table, its bridge and the forwarding it enabled), removes the
// cgroup parent its daemon recorded (and no other: another daemon's may be
// in use) and unmounts its storage pool. Volumes, snapshots and records
// stay on disk: a later `warren serve` finds the sandboxes failed and
// cleans them up. The daemon must not be running.
func Teardown(ctx context.Context, cfg config.Config, log *slog.Logger) error {
	if _, err := os.Stat(cfg.DataDir); err != nil {
		return fmt.Errorf("data dir %s: %w", cfg.DataDir, err)
	}
	parent, err := recordedCgroupParent(cfg)
	if err != nil {
		return err
	}
	cfg.CgroupParent = parent
	var errs []error
	rt, err := openNative(cfg, log)
	if err != nil {
		errs = append(errs, fmt.Errorf("open runtime: %w", err))
	} else {
		ids, err := rt.List(ctx)
		if err != nil {
			errs = append(errs, err)
		}
		for _, id := range ids {
			if err := rt.Destroy(ctx, id); err != nil {
				errs = append(errs, fmt.Errorf("stop sandbox %s: %w", id, err))
			}
		}
		rt.RemoveParentCgroups()
	}
	errs = append(errs, teardownGVisor(ctx, cfg, log))
	// With the processes gone, their networks can go.
	errs = append(errs, teardownNetwork(ctx, cfg, log))
	d, err := OpenStorage(ctx, cfg, log)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	errs = append(errs, d.Close())
	if u, ok := d.Storage.(interface{ Unmount() error }); ok {
		errs = append(errs, u.Unmount())
	}
	return errors.Join(errs...)
}

// teardownGVisor destroys the gvisor runtime's sandboxes, if it has any
// (without runsc they cannot be driven: that is an error then).
func teardownGVisor(ctx context.Context, cfg config.Config, log *slog.Logger) error {
	entries, _ := os.ReadDir(filepath.Join(cfg.GVisorStateDir(), "sandboxes"))
	gv, err := openGVisor(cfg, log)
	if err != nil {
		if len(entries) == 0 {
			return nil
		}
		return fmt.Errorf("stop gvisor sandboxes: %w", err)
	}
	ids, err := gv.List(ctx)
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	for _, id := range ids {
		if err := gv.Destroy(ctx, id); err != nil {
			errs = append(errs, fmt.Errorf("stop gvisor sandbox %s: %w", id, err))
		}
	}
	gv.RemoveParentCgroups()
	return errors.Join(errs...)
}

// teardownNetwork removes what the data directory's daemon made for
// sandbox networks, where its run directory says it made it.
func teardownNetwork(ctx context.Context, cfg config.Config, log *slog.Logger) error {
	dataDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return err
	}
	cfg.DataDir = dataDir
	runDir := cfg.NetworkRunDir()
	opts, ok, err := sandbox.RecordedNetwork(runDir, dataDir)
	if err != nil || !ok {
		return err
	}
	opts.Log = log
	m, err := network.New(opts)
	if err != nil {
		// Its namespace is gone (a test's fake host) or unusable: what is
		// left here are the sandboxes' namespace mounts.
		log.Warn("the network's namespace cannot be opened; unmounting the sandboxes' namespaces only", "err", err)
		return mountinfo.DetachUnder(runDir, false)
	}
	if err := m.Uninstall(ctx); err != nil {
		return fmt.Errorf("remove sandbox networks: %w", err)
	}
	return os.Remove(filepath.Join(runDir, "options.json"))
}
