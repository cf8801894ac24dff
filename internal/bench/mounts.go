package bench

import (
	"context"
	"errors"
	"fmt"
	"github.com/warrenhq/warren/internal/mountinfo"
	"log/slog"
	"os"
	"strings"

	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/daemon"
)

// RemoveDataDir removes a throwaway data directory, unless something is
// still mounted below it: removing the files of a mounted pool would
// destroy it while leaving the mount (and its loop device) behind.
func RemoveDataDir(dir string) error {
	mounts, err := mountsUnder(dir)
	if err != nil {
		return err
	}
	if len(mounts) > 0 {
		return fmt.Errorf("left %s in place: %s is still mounted (unmount it, then remove the directory)", dir, strings.Join(mounts, ", "))
	}
	return os.RemoveAll(dir)
}

// unmountPool unmounts the pool a failed daemon.Open may have left mounted
// under cfg.DataDir (a daemon keeps its pool mounted when it closes, for the
// next one).
func unmountPool(ctx context.Context, cfg config.Config, log *slog.Logger) error {
	mounts, err := mountsUnder(cfg.DataDir)
	if err != nil || len(mounts) == 0 {
		return err
	}
	d, err := daemon.OpenStorage(ctx, cfg, log)
	if err != nil {
		return fmt.Errorf("reopen the pool to unmount it: %w", err)
	}
	errs := []error{d.Close()}
	if u, ok := d.Storage.(interface{ Unmount() error }); ok {
		errs = append(errs, unmountRetrying(u))
	}
	return errors.Join(errs...)
}

// mountsUnder lists the mount points at or below dir.
func mountsUnder(dir string) ([]string, error) { return mountinfo.Under(dir) }
