package main

import (
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/warrenhq/warren/client"
)

func sandboxPauseCmd(a *app) *cobra.Command {
	var noMemory bool
	cmd := &cobra.Command{
		Use:   "pause ID...",
		Short: "Freeze sandboxes: processes stop where they are, memory is kept, the run timeout stops",
		Long: `Freeze each sandbox: its processes stop where they are, its memory is kept, its
run timeout stops; "warren sandbox resume" thaws it. With --no-memory the processes
end instead and only the files are kept (E2B's pause {memory: false}): the sandbox
holds no memory, and resume boots it cold, as after a reboot.`,
		Args: args(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, ids []string) error {
			c := a.client()
			pause := c.Lifecycle.Pause
			if noMemory {
				pause = c.Lifecycle.PauseFiles
			}
			return eachID(a, ids, "sandbox", func(id string) error { return pause(cmd.Context(), id) })
		},
	}
	cmd.Flags().BoolVar(&noMemory, "no-memory", false, "end the processes and keep only the files; resume boots cold")
	return cmd
}

func sandboxHibernateCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "hibernate ID...",
		Short: "Save sandboxes' memory and processes to disk and free them (gvisor runtime); resume brings them back",
		Long: `Save each sandbox's memory and processes to disk and end them: a hibernated sandbox
holds no memory, CPU or processes, does not count against the sandbox limit, and
survives daemon restarts and reboots. "warren sandbox resume" (or any call, with
autoResume) restores it with its processes where they were. Needs the gvisor runtime.`,
		Args: args(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, ids []string) error {
			c := a.client()
			return eachID(a, ids, "sandbox", func(id string) error {
				_, err := c.Lifecycle.Hibernate(cmd.Context(), id)
				return err
			})
		},
	}
}

func sandboxResumeCmd(a *app) *cobra.Command {
	var reboot bool
	cmd := &cobra.Command{
		Use:   "resume ID...",
		Short: "Thaw paused sandboxes, restore hibernated ones, boot cold those paused without memory",
		Args:  args(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, ids []string) error {
			c := a.client()
			resume := c.Lifecycle.Resume
			if reboot {
				resume = c.Lifecycle.Reboot
			}
			return eachID(a, ids, "sandbox", func(id string) error {
				_, err := resume(cmd.Context(), id)
				return err
			})
		},
	}
	cmd.Flags().BoolVar(&reboot, "reboot", false, "drop the memory and boot cold on the files (E2B's onResume: 'reboot')")
	return cmd
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
			return a.client().Lifecycle.SetTimeout(cmd.Context(), argv[0], secs)
		},
	}
}

func sandboxEventsCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "events ID",
		Short: "Show a sandbox's history: each transition, when and why, and its egress audit (network events)",
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			c := a.client()
			evs, err := c.Sandboxes.Events(cmd.Context(), argv[0], 0)
			if err != nil {
				return err
			}
			if a.json {
				// The egress audit as JSON: warren sandbox network events --json.
				return printJSON(a.out, evs)
			}
			netEvs, err := allNetworkEvents(cmd.Context(), c, argv[0], 0)
			if err != nil {
				return err
			}
			tw := newTable(a.out)
			row(tw, "TIME", "EVENT", "STATE", "CAUSE", "DETAIL")
			// Both lists are oldest first: merge them by time.
			for len(evs) > 0 || len(netEvs) > 0 {
				if len(netEvs) > 0 && (len(evs) == 0 || netEvs[0].At.Before(evs[0].At)) {
					e := netEvs[0]
					netEvs = netEvs[1:]
					row(tw, fmtTime(e.At), "network", "-", "sandbox", networkEventLine(e))
					continue
				}
				e := evs[0]
				evs = evs[1:]
				state := e.To
				if e.From != "" && e.From != e.To {
					state = e.From + " → " + e.To
				}
				row(tw, fmtTime(e.At), e.Kind, orDash(state), e.Cause, orDash(e.Detail))
			}
			return tw.Flush()
		},
	}
}

func sandboxStopCmd(a *app) *cobra.Command {
	var grace, drainWait time.Duration
	var kill, drain bool
	cmd := &cobra.Command{
		Use:   "stop ID...",
		Short: "Stop sandboxes' processes (SIGTERM, then SIGKILL after --grace) and keep their filesystems",
		Args:  args(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, ids []string) error {
			c := a.client()
			return eachID(a, ids, "sandbox", func(id string) error {
				var err error
				if drain {
					_, err = c.Lifecycle.Drain(cmd.Context(), id, drainWait, grace)
				} else {
					_, err = c.Lifecycle.Stop(cmd.Context(), id, grace, kill)
				}
				return err
			})
		},
	}
	cmd.Flags().DurationVar(&grace, "grace", 10*time.Second, "how long processes get after SIGTERM")
	cmd.Flags().BoolVar(&kill, "kill", false, "kill at once (no SIGTERM)")
	cmd.Flags().BoolVar(&drain, "drain", false, "refuse new calls and wait for running commands first")
	cmd.Flags().DurationVar(&drainWait, "drain-wait", time.Minute, "with --drain: how long to wait for running commands")
	return cmd
}

func sandboxLimitsCmd(a *app) *cobra.Command {
	var l client.Limits
	cmd := &cobra.Command{
		Use:   "limits ID [--memory-mb N] [--cpus F] [--pids N] [--disk-mb N]",
		Short: "Change a running sandbox's limits in place",
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if l.MemoryMB < 0 || l.CPUCount < 0 || l.Pids < 0 || l.DiskMB < 0 {
				return usageError{fmt.Errorf("limits must not be negative")}
			}
			det, err := a.client().Lifecycle.UpdateLimits(cmd.Context(), argv[0], l)
			if err != nil {
				return err
			}
			if a.json {
				return printJSON(a.out, det)
			}
			disk := "none"
			if det.DiskSizeMB > 0 {
				disk = fmtBytes(det.DiskSizeMB << 20)
			}
			fmt.Fprintf(a.out, "%s: memory %s, cpus %s, pids %d, disk %s\n", det.SandboxID, fmtBytes(det.MemoryMB<<20), fmtFloat(det.CPUCount), det.Pids, disk)
			return nil
		},
	}
	cmd.Flags().Int64Var(&l.MemoryMB, "memory-mb", 0, "memory limit in MiB (0 = unchanged)")
	cmd.Flags().Float64Var(&l.CPUCount, "cpus", 0, "CPU limit (0 = unchanged)")
	cmd.Flags().Int64Var(&l.Pids, "pids", 0, "process limit (0 = unchanged)")
	cmd.Flags().Int64Var(&l.DiskMB, "disk-mb", 0, "disk quota in MiB, snapshots included; not below what the sandbox holds (0 = unchanged; btrfs only)")
	return cmd
}
