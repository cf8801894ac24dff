package main

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/warrenhq/warren/internal/runtime/native"
)

// execNaiveCmd is `runc exec` rebuilt on warren's runtime: one process per
// command, which loads the sandbox's state and enters its namespaces and
// cgroups to run argv. It is hidden: warren runs commands through its agent,
// and this exists only as `warren bench`'s baseline.
func execNaiveCmd() *cobra.Command {
	var stateDir string
	cmd := &cobra.Command{
		Use:    "exec-naive --state-dir DIR ID -- CMD...",
		Hidden: true,
		Args:   cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			rt, err := native.New(native.Options{StateDir: stateDir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				return err
			}
			code, err := rt.ExecNaive(cmd.Context(), args[0], args[1:])
			if err != nil {
				return err
			}
			if code != 0 {
				return fmt.Errorf("exit %d", code)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&stateDir, "state-dir", "", "the native runtime's state directory")
	_ = cmd.MarkFlagRequired("state-dir")
	return cmd
}
