package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
)

func poolsCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "pools",
		Short: "Show the warm pools (serve --pool TEMPLATE[@RUNTIME]=MIN[:MAX[:TTL]])",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			pools, err := a.client().Pools.List(cmd.Context())
			if err != nil {
				return err
			}
			if a.json {
				return printJSON(a.out, pools)
			}
			tw := newTable(a.out)
			row(tw, "TEMPLATE", "RUNTIME", "READY", "MIN", "MAX", "TTL", "HITS", "MISSES", "EXPIRED", "CLAIM P50", "LAST FAILURE")
			for _, p := range pools {
				ttl := "-"
				if p.TTLSeconds > 0 {
					ttl = (time.Duration(p.TTLSeconds) * time.Second).String()
				}
				row(tw, p.TemplateID, orDash(p.Runtime), fmt.Sprint(p.Ready), fmt.Sprint(p.Min), fmt.Sprint(p.Max), ttl,
					fmt.Sprint(p.Hits), fmt.Sprint(p.Misses), fmt.Sprint(p.Expired), fmt.Sprintf("%.2fms", p.ClaimP50Ms), orDash(p.LastFailure))
			}
			return tw.Flush()
		},
	}
}
