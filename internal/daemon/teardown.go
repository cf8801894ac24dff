package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/runtime/native"
)

// Teardown stops every sandbox of a data directory (their processes,
// cgroups and runtime state) and unmounts its storage pool. Volumes,
// snapshots and records stay on disk: a later `warren serve` finds the
// sandboxes failed and cleans them up. The daemon must not be running.
func Teardown(ctx context.Context, cfg config.Config, log *slog.Logger) error {
	if _, err := os.Stat(cfg.DataDir); err != nil {
		return fmt.Errorf("data dir %s: %w", cfg.DataDir, err)
	}
	var errs []error
	rt, err := native.New(native.Options{StateDir: cfg.RuntimeStateDir(), Logger: log})
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
