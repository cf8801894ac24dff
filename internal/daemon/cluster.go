//go:build kube

package daemon

import (
	"context"
	"fmt"
	"path/filepath"
	goruntime "runtime"

	"golang.org/x/sys/unix"

	"github.com/warrenhq/warren/internal/config"
	"github.com/warrenhq/warren/internal/devices"
	"github.com/warrenhq/warren/internal/kube/fleet"
	"github.com/warrenhq/warren/internal/kube/node"
	"github.com/warrenhq/warren/internal/metrics"
	"github.com/warrenhq/warren/internal/session"
	"github.com/warrenhq/warren/internal/storage"
	"github.com/warrenhq/warren/internal/store"
)

// startCluster starts node mode when --cluster asks for it; addr is the
// address the API listens on (the default advertised endpoint).
func (d *Daemon) startCluster(ctx context.Context, addr string) error {
	k := d.cfg.Cluster
	if k.Cluster != config.ClusterKubernetes {
		return nil
	}
	c, restCfg, err := fleet.NewClient(k.Kubeconfig)
	if err != nil {
		return fmt.Errorf("--cluster kubernetes: %w", err)
	}
	rep := d.nodeReport()
	n, err := node.Start(ctx, node.Config{
		Client:        c,
		Namespace:     k.Namespace,
		Node:          k.NodeName,
		Endpoint:      k.Advertise(addr),
		Version:       Version,
		LeaseDuration: k.LeaseDuration,
		Sandboxes:     d.Sessions,
		Keys:          d.Store,
		Reporter:      rep,
		Runtimes:      rep.runtimes,
		Log:           d.log,
		Pools:         d.Sessions,
		BasePools:     sessionPools(d.cfg),
	})
	if err != nil {
		return fmt.Errorf("%w (API server %s)", err, restCfg.Host)
	}
	d.cluster.Store(&nodeModeRef{n})
	return nil
}

// reporter reports the daemon's capacity and use for its WarrenNode.
type reporter struct {
	store        *store.Store
	runtimes     []string
	poolPath     string
	maxSandboxes int
	devices      *devices.Service
}

func (d *Daemon) nodeReport() *reporter {
	r := &reporter{store: d.Store, maxSandboxes: d.cfg.MaxSandboxes, devices: d.Devices,
		poolPath: filepath.Dir(d.Storage.Path(storage.Key{Kind: storage.KindSandbox, Name: "x"}))}
	for _, rt := range d.runtimes {
		if rt.Available {
			r.runtimes = append(r.runtimes, rt.Name)
		}
	}
	return r
}

// Report: capacity is the host's memory and CPUs, the pool's size and
// --max-sandboxes; use is what the live sandboxes' limits reserve and what
// the pool holds.
func (r *reporter) Report(ctx context.Context) (node.Report, error) {
	rep := node.Report{Runtimes: r.runtimes}
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return rep, fmt.Errorf("sysinfo: %w", err)
	}
	rep.Capacity.MemoryBytes = int64(si.Totalram) * int64(si.Unit)
	rep.Capacity.CPUMillis = int64(goruntime.NumCPU()) * 1000
	rep.Capacity.Sandboxes = int32(r.maxSandboxes)
	if p, err := metrics.StatPool(r.poolPath); err == nil {
		rep.Capacity.DiskBytes, rep.Used.DiskBytes = p.TotalBytes, p.UsedBytes
	}
	live, err := r.store.ListSandboxes(ctx, store.SandboxFilter{States: []store.SandboxState{session.StateCreating, session.StateRunning, session.StatePaused}})
	if err != nil {
		return rep, err
	}
	for _, sb := range live {
		rep.Used.MemoryBytes += sb.MemoryBytes
		rep.Used.CPUMillis += sb.CPUMillis
	}
	rep.Used.Sandboxes = int32(len(live))
	tmpls, err := r.store.ListTemplates(ctx)
	if err != nil {
		return rep, err
	}
	for _, t := range tmpls {
		rep.Templates = append(rep.Templates, t.Name)
	}
	if r.devices != nil {
		if rep.Devices, err = r.devices.Free(ctx); err != nil {
			return rep, err
		}
	}
	rep.SnapshotCount, rep.SnapshotBytes, err = r.store.SnapshotTotals(ctx)
	if err != nil {
		return rep, err
	}
	return rep, nil
}
