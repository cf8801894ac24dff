//go:build kube

package main

import (
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/warrenhq/warren/internal/gateway"
)

// gatewayCmd runs the fleet's gateway (Kubernetes mode): one entry point
// that places creates on warren nodes and routes every call to the node
// holding its sandbox.
func gatewayCmd() *cobra.Command {
	cfg := gateway.DefaultConfig()
	var debug bool
	cmd := &cobra.Command{
		Use:   "gateway",
		Short: "Run the gateway of a warren fleet on Kubernetes (routes the API to the nodes)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			level := slog.LevelInfo
			if debug {
				level = slog.LevelDebug
			}
			log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return gateway.Run(ctx, cfg, log)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Listen, "listen", cfg.Listen, "address of the gateway's API (env WARREN_GATEWAY_LISTEN)")
	f.StringVar(&cfg.Kubeconfig, "kubeconfig", cfg.Kubeconfig, "kubeconfig file; empty = the pod's service account (env KUBECONFIG)")
	f.StringVar(&cfg.Namespace, "kube-namespace", cfg.Namespace, "namespace of warren's Sandbox objects, Leases and API key Secrets (env WARREN_KUBE_NAMESPACE)")
	f.StringVar(&cfg.Domain, "domain", cfg.Domain, "sandbox domain: Host <port>-<id>.<domain> reaches that port of that sandbox; the nodes must use the same (env WARREN_GATEWAY_DOMAIN, else WARREN_DOMAIN)")
	f.IntVar(&cfg.PlacementSample, "placement-sample", cfg.PlacementSample, "nodes placement samples and compares per create, best of K (env WARREN_GATEWAY_PLACEMENT_SAMPLE)")
	f.StringVar(&cfg.GatewayID, "gateway-id", cfg.GatewayID, "this replica's name in logs and /health (env WARREN_GATEWAY_ID; default <hostname>-<pid>)")
	f.BoolVar(&cfg.Controllers, "controllers", cfg.Controllers, "run the fleet's controller loops under leader election (one replica acts): place Sandbox objects applied without a node, mark a lost node's sandboxes Lost (env WARREN_GATEWAY_CONTROLLERS)")
	f.BoolVar(&cfg.Replicate, "replicate", cfg.Replicate, "with --controllers, keep a copy of every paused or hibernated sandbox on a second node, from which a connect restores it if its node is lost (env WARREN_GATEWAY_REPLICATE)")
	f.BoolVar(&cfg.DrainOnCordon, "drain-on-cordon", cfg.DrainOnCordon, "with --controllers, move the sandboxes off a node whose Kubernetes Node is cordoned (kubectl drain, kubectl cordon) unless the Node is annotated warren.dev/drain=false; without it only Nodes annotated warren.dev/drain=true are drained (env WARREN_GATEWAY_DRAIN_ON_CORDON)")
	f.BoolVar(&debug, "debug", false, "log each request a node did not answer")
	return cmd
}
