package daemon

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/server"
)

// nodeMode is what the daemon calls of node mode once it started: the
// in-process node.Node in warren-fleet (built with the kube tag); the
// warren binary has none yet (docs/kubernetes-binsplit.md: a client of a node-mode
// sidecar is to take its place).
type nodeMode interface {
	Nudge()
	Close()
	FleetAdminKey(ctx context.Context) (string, error)
	CheckPeer(ctx context.Context, endpoint string) error
}

// nodeModeRef lets an atomic.Pointer hold a nodeMode.
type nodeModeRef struct{ nodeMode }

// pullConfig lets POST /snapshots/pull fetch from peers in node mode,
// with the fleet's admin key node mode reads from its Secret; outside it
// the route answers 501.
func (d *Daemon) pullConfig() server.PullConfig {
	pc := server.PullConfig{SpoolDir: filepath.Join(d.cfg.DataDir, "pulls")}
	if d.cfg.Cluster.Cluster != config.ClusterKubernetes {
		return pc
	}
	pc.FleetKey = func(ctx context.Context) (string, error) {
		n := d.cluster.Load()
		if n == nil {
			return "", fmt.Errorf("node mode has not started yet: %w", errdefs.ErrUnavailable)
		}
		return n.FleetAdminKey(ctx)
	}
	pc.CheckPeer = func(ctx context.Context, endpoint string) error {
		n := d.cluster.Load()
		if n == nil {
			return fmt.Errorf("node mode has not started yet: %w", errdefs.ErrUnavailable)
		}
		return n.CheckPeer(ctx, endpoint)
	}
	return pc
}

// stopCluster stops node mode's loops, if they run.
func (d *Daemon) stopCluster() {
	if n := d.cluster.Swap(nil); n != nil {
		n.Close()
	}
}

// nudgeCluster tells node mode that a sandbox changed.
func (d *Daemon) nudgeCluster() {
	if n := d.cluster.Load(); n != nil {
		n.Nudge()
	}
}
