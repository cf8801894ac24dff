package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/warrenhq/warren/client"
)

func teamCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "team",
		Aliases: []string{"teams"},
		Short:   "A team's limits and usage",
	}
	cmd.AddCommand(teamLimitsCmd(a), teamUsageCmd(a))
	return cmd
}

func teamLimitsCmd(a *app) *cobra.Command {
	var l client.TeamLimits
	cmd := &cobra.Command{
		Use:   "limits TEAM [--sandboxes N] [--memory-mb MiB] [--cpus N] [--disk-mb MiB]",
		Short: "Set what one team's sandboxes may hold together (admin key; a limit not given is none)",
		Long: `Set what one team's sandboxes may hold together: sandboxes alive (running, paused or being
created), their memory and CPU limits added up, and the disk quotas of every sandbox not deleted
added up. Every limit is set at once: one not given, or 0, is no limit. A create, fork, warm-pool
claim, resume of a hibernated sandbox or limit change that would pass a limit is refused (429).`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if l.Sandboxes < 0 || l.MemoryMB < 0 || l.CPUCount < 0 || l.DiskMB < 0 {
				return usageError{fmt.Errorf("limits must not be negative (0 = no limit)")}
			}
			got, err := a.client().Teams.SetLimits(cmd.Context(), argv[0], l)
			if err != nil {
				return err
			}
			if a.json {
				return printJSON(a.out, got)
			}
			tw := newTable(a.out)
			row(tw, "TEAM", "SANDBOXES", "MEMORY", "CPUS", "DISK")
			row(tw, got.Team, limitText(got.Sandboxes, ""), limitText(got.MemoryMB, " MiB"), limitText(int64(got.CPUCount*1000), "m"), limitText(got.DiskMB, " MiB"))
			return tw.Flush()
		},
	}
	f := cmd.Flags()
	f.Int64Var(&l.Sandboxes, "sandboxes", 0, "sandboxes alive at once (0 = no limit)")
	f.Int64Var(&l.MemoryMB, "memory-mb", 0, "memory of the sandboxes alive, added up, in MiB (0 = no limit)")
	f.Float64Var(&l.CPUCount, "cpus", 0, "CPUs of the sandboxes alive, added up (0 = no limit)")
	f.Int64Var(&l.DiskMB, "disk-mb", 0, "disk quotas of the sandboxes not deleted, added up, in MiB (0 = no limit)")
	return cmd
}

func teamUsageCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "usage TEAM",
		Short: "Show what one team's sandboxes hold, against its limits (admin key, or a key of that team)",
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			u, err := a.client().Teams.Usage(cmd.Context(), argv[0])
			if err != nil {
				return err
			}
			if a.json {
				return printJSON(a.out, u)
			}
			tw := newTable(a.out)
			row(tw, "", "SANDBOXES", "MEMORY MIB", "CPUS", "DISK MIB")
			row(tw, "used", fmt.Sprint(u.Sandboxes), fmt.Sprint(u.MemoryMB), fmt.Sprint(u.CPUCount), fmt.Sprint(u.DiskMB))
			row(tw, "limit", limitText(u.Limits.Sandboxes, ""), limitText(u.Limits.MemoryMB, ""), limitText(int64(u.Limits.CPUCount*1000), "m"), limitText(u.Limits.DiskMB, ""))
			if err := tw.Flush(); err != nil {
				return err
			}
			if u.SandboxesWithoutDiskQuota > 0 {
				fmt.Fprintf(a.out, "%d sandboxes have no disk quota (their disk is not counted)\n", u.SandboxesWithoutDiskQuota)
			}
			return nil
		},
	}
}

// limitText shows a limit, "none" for 0.
func limitText(n int64, unit string) string {
	if n == 0 {
		return "none"
	}
	return fmt.Sprint(n) + unit
}
