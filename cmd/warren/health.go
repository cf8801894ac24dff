package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/warrenhq/warren/client"
)

func healthCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "health",
		Short: "Show the server's health: status, storage pool use, sandboxes, commands in flight, last errors",
		Long: `health shows GET /health: the status (ok, degraded when the storage pool
is 85 % full, unhealthy at 95 %), the pool's use, how many sandboxes run,
how many commands run in them now, the uptime, and the errors the daemon
hit lately (failed sandboxes, failed background operations, 5xx answers).
The last errors are listed only with an admin key (they name sandboxes of
every team); others see how many there were.`,
		Example: `  warren health
  warren health --json`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			h, err := a.client().Meta.Health(cmd.Context())
			if err != nil {
				return err
			}
			if a.json {
				return printJSON(a.out, h)
			}
			tw := newTable(a.out)
			row(tw, "status:", h.Status)
			row(tw, "version:", h.Version)
			row(tw, "storage:", h.Storage)
			row(tw, "runtime:", h.Runtime)
			if mode := usernsMode(h.Capabilities); mode != "" {
				row(tw, "user namespaces:", mode)
			}
			if h.Pool != nil {
				row(tw, "pool:", fmt.Sprintf("%s of %s (%.1f%%)", fmtBytes(h.Pool.UsedBytes), fmtBytes(h.Pool.TotalBytes), h.Pool.UsedPct))
			}
			row(tw, "sandboxes:", fmt.Sprint(h.Sandboxes))
			row(tw, "commands in flight:", fmt.Sprint(h.CommandsInFlight))
			row(tw, "uptime:", (time.Duration(h.UptimeSeconds) * time.Second).String())
			row(tw, "errors:", fmt.Sprint(h.ErrorsTotal))
			if err := tw.Flush(); err != nil {
				return err
			}
			if len(h.LastErrors) == 0 {
				return nil
			}
			fmt.Fprintln(a.out, "\nlast errors (newest first):")
			tw = newTable(a.out)
			row(tw, "TIME", "OPERATION", "SANDBOX", "MESSAGE")
			for _, e := range h.LastErrors {
				row(tw, fmtTime(e.At), e.Op, orDash(e.SandboxID), e.Message)
			}
			return tw.Flush()
		},
	}
}

// usernsMode says whether the native runtime's sandboxes start in user
// namespaces: "on", "off: <why>", or "" from a server that does not say.
func usernsMode(c *client.Capabilities) string {
	if c == nil {
		return ""
	}
	for _, r := range c.Runtimes {
		switch {
		case r.UserNS:
			return "on (" + r.Name + ")"
		case r.UserNSOff != "":
			return "off: " + r.UserNSOff
		}
	}
	return ""
}
