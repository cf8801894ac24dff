package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func poolsCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "pools",
		Short: "Show the warm pools (serve --pool TEMPLATE=MIN[:MAX])",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			pools, err := a.client().ListPools(cmd.Context())
			if err != nil {
				return err
			}
			if a.json {
				return printJSON(a.out, pools)
			}
			tw := newTable(a.out)
			row(tw, "TEMPLATE", "READY", "MIN", "MAX", "HITS", "MISSES", "CLAIM P50", "LAST FAILURE")
			for _, p := range pools {
				row(tw, p.TemplateID, fmt.Sprint(p.Ready), fmt.Sprint(p.Min), fmt.Sprint(p.Max),
					fmt.Sprint(p.Hits), fmt.Sprint(p.Misses), fmt.Sprintf("%.2fms", p.ClaimP50Ms), orDash(p.LastFailure))
			}
			return tw.Flush()
		},
	}
}
