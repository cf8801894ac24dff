package main

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"
)

func sandboxPauseCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "pause ID...",
		Short: "Freeze sandboxes: processes stop where they are, memory is kept, the run timeout stops",
		Args:  args(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, ids []string) error {
			c := a.client()
			return eachID(a, ids, "sandbox", func(id string) error { return c.PauseSandbox(cmd.Context(), id) })
		},
	}
}

func sandboxResumeCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "resume ID...",
		Short: "Thaw paused sandboxes",
		Args:  args(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, ids []string) error {
			c := a.client()
			return eachID(a, ids, "sandbox", func(id string) error {
				_, err := c.ResumeSandbox(cmd.Context(), id)
				return err
			})
		},
	}
}

func sandboxTimeoutCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "timeout ID SECONDS",
		Short: "Make a sandbox time out SECONDS from now (0 = never)",
		Args:  args(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			secs, err := strconv.ParseInt(argv[1], 10, 64)
			if err != nil || secs < 0 {
				return usageError{fmt.Errorf("SECONDS %q: want a whole number >= 0", argv[1])}
			}
			return a.client().SetTimeout(cmd.Context(), argv[0], secs)
		},
	}
}
