package main

import (
	"encoding/json"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/warrenhq/warren/internal/bench"
)

// benchCmd runs the latency benchmark on a throwaway data directory and
// prints the report as JSON.
func benchCmd() *cobra.Command {
	var opts bench.Options
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure create→first output, exec round trips (vs a runc-exec-style baseline) and delete; print JSON",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, _ := cmd.Flags().GetString("data-dir")
			if !cmd.Flags().Changed("data-dir") || dir == "" || dir == "/var/lib/warren" {
				tmp, err := os.MkdirTemp("", "warren-bench-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(tmp)
				dir = tmp
			}
			opts.DataDir = dir
			if exe, err := os.Executable(); err == nil {
				opts.WarrenBinary = exe
			}
			opts.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
			rep, err := bench.Run(cmd.Context(), opts)
			if err != nil {
				return err
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			return enc.Encode(rep)
		},
	}
	f := cmd.Flags()
	f.IntVar(&opts.Creates, "creates", 30, "sandboxes to create and delete")
	f.IntVar(&opts.Execs, "execs", 300, "exec round trips per method")
	f.StringVar(&opts.Storage, "storage", "btrfs", "storage backend")
	f.StringVar(&opts.Template, "template", "", "an existing template in --data-dir (default: build a busybox one)")
	f.StringVar(&opts.AgentBinary, "agent", "", "warren-agent binary (default: beside warren)")
	return cmd
}
