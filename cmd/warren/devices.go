package main

import (
	"strings"

	"github.com/spf13/cobra"
)

func devicesCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "devices",
		Aliases: []string{"device"},
		Short:   "List the host's devices (CDI) and the sandboxes holding them",
		Long: `List the devices the host offers to sandboxes: those named by the CDI specs
under the daemon's --cdi-spec-dirs (for NVIDIA GPUs, nvidia-ctk cdi generate writes
them). A sandbox asks for one at create (warren sandbox create --device NAME) and
holds it until deleted; an exclusive device is given to one sandbox at a time.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ds, err := a.client().Meta.Devices(cmd.Context())
			if err != nil {
				return err
			}
			if a.json {
				return printJSON(a.out, ds)
			}
			tw := newTable(a.out)
			row(tw, "NAME", "SHARING", "HELD BY", "SPEC")
			for _, d := range ds {
				sharing := "exclusive"
				if d.Shareable {
					sharing = "shareable"
				}
				held := strings.Join(d.HeldBy, ",")
				if held == "" {
					held = "-"
				}
				row(tw, d.Name, sharing, held, d.Spec)
			}
			return tw.Flush()
		},
	}
}
