package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// nodesCmd lists a fleet's nodes through its gateway: what the dashboard's
// Nodes panel shows.
func nodesCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "nodes",
		Short: "List a fleet's nodes with their capacity and use (through the gateway at --url)",
		Long: `nodes shows the fleet gateway's GET /fleet/nodes: each node's state, sandboxes,
memory and CPU (used of capacity) and runtimes, from the gateway's cache of WarrenNodes.
A single daemon has no nodes to list (404).`,
		Example: `  WARREN_URL=http://warren-gateway:3000 warren nodes
  warren nodes --json`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			nodes, err := a.client().Meta.FleetNodes(cmd.Context())
			if err != nil {
				return err
			}
			if a.json {
				return printJSON(a.out, nodes)
			}
			tw := newTable(a.out)
			row(tw, "NODE", "STATE", "SANDBOXES", "MEMORY", "CPU", "RUNTIMES")
			for _, n := range nodes {
				state := "not ready"
				if n.Ready {
					state = "ready"
				}
				if n.Unschedulable {
					state += ", cordoned"
				}
				row(tw, n.Name, state, nodeUse(int64(n.Used.Sandboxes), int64(n.Capacity.Sandboxes), func(v int64) string { return fmt.Sprint(v) }),
					nodeUse(n.Used.MemoryBytes, n.Capacity.MemoryBytes, fmtBytes),
					nodeUse(n.Used.MilliCPU, n.Capacity.MilliCPU, func(m int64) string { return fmt.Sprintf("%.1f", float64(m)/1000) }),
					strings.Join(n.Runtimes, ","))
			}
			return tw.Flush()
		},
	}
}

// nodeUse is "used/capacity", or the use alone when the capacity is unknown.
func nodeUse(used, capacity int64, f func(int64) string) string {
	if capacity == 0 {
		return f(used)
	}
	return f(used) + "/" + f(capacity)
}
