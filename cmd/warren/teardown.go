package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/daemon"
)

// teardownCmd stops every sandbox of a data directory and unmounts its
// pool: for uninstalling, or for tests that must leave nothing running.
func teardownCmd() *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "teardown --yes",
		Short: "Stop every sandbox of the data directory and unmount its pool (the daemon must be stopped first)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !yes {
				return errors.New("this kills every sandbox of the data directory; pass --yes to confirm")
			}
			cfg := config.Default()
			if v, _ := cmd.Flags().GetString("data-dir"); v != "" {
				cfg.DataDir = v
			}
			log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
			if err := daemon.Teardown(cmd.Context(), cfg, log); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "stopped every sandbox of %s and unmounted its pool\n", cfg.DataDir)
			return nil
		},
	}
	cmd.Flags().BoolVar(&yes, "yes", false, "confirm")
	return cmd
}
