//go:build !kube

package daemon

import (
	"context"
	"fmt"

	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/errdefs"
)

// startCluster refuses --cluster kubernetes in the warren binary, which
// links no Kubernetes library (libcontainer re-executes it for every
// sandbox start, and each linked package's init would run first): `warren
// serve` hands such a start to warren-fleet before it gets here.
func (d *Daemon) startCluster(context.Context, string) error {
	if d.cfg.Cluster.Cluster != config.ClusterKubernetes {
		return nil
	}
	return fmt.Errorf("--cluster kubernetes runs in warren-fleet, and this binary links no Kubernetes library: %w", errdefs.ErrInvalid)
}
