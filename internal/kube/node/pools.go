package node

// SandboxPool objects → the node's warm pools, and the node's line in each
// pool's status.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warrenv1 "github.com/warrenhq/warren/apis/warren/v1alpha1"
	"github.com/warrenhq/warren/internal/session"
)

// Pools is what the pool sync needs of the session service.
type Pools interface {
	SetPools(ctx context.Context, cfgs []session.PoolConfig)
	PoolStats() []session.PoolStats
}

// syncPools sets the node's warm pools to its --pool flags plus every
// SandboxPool whose node selector takes this node, and writes the node's
// line in each pool's status.
func (n *Node) syncPools(ctx context.Context) error {
	var objs warrenv1.SandboxPoolList
	if err := n.cfg.Client.List(ctx, &objs, client.InNamespace(n.cfg.Namespace)); err != nil {
		return fmt.Errorf("list SandboxPool objects: %w", err)
	}
	var wn warrenv1.WarrenNode
	if err := n.cfg.Client.Get(ctx, objectKey("", n.cfg.Node), &wn); ignoreGone(err) != nil {
		return fmt.Errorf("WarrenNode %s: %w", n.cfg.Node, err)
	}
	want, selected, refused := poolConfigs(n.cfg.BasePools, objs.Items, wn.Labels, n.cfg.Runtimes)
	if n.pools == nil || !slices.Equal(want, n.pools) {
		n.cfg.Pools.SetPools(ctx, want)
		n.pools = want
	}
	stats := n.cfg.Pools.PoolStats()
	var errs []error
	for _, o := range objs.Items {
		var st *session.PoolStats
		if selected[o.Name] {
			st = statsOf(stats, o.Spec.Template, o.Spec.Network)
		}
		if why, ok := refused[o.Name]; ok {
			st = &session.PoolStats{Template: o.Spec.Template, Network: o.Spec.Network, LastFailure: why}
		}
		nodes, changed := nodeLines(o.Status.Nodes, n.cfg.Node, st)
		if !changed {
			continue
		}
		o.Status.Nodes = nodes
		o.Status.Ready, o.Status.NodeCount = 0, int32(len(nodes))
		for _, line := range nodes {
			o.Status.Ready += line.Ready
		}
		if err := n.cfg.Client.Status().Update(ctx, &o); err != nil {
			errs = append(errs, fmt.Errorf("status of SandboxPool %s: %w", o.Name, err))
		}
	}
	return errors.Join(errs...)
}

// poolConfigs is the node's warm pools: base (its flags), then each
// SandboxPool that selects a node with nodeLabels, unless a pool of the
// same template, network and runtime came before it. selected names the objects
// whose pool the node keeps; refused, those that select it but ask for a
// runtime it does not have (runtimes; nil: any), and why, for the pool's
// status: such a pool is not kept rather than failing every refill.
func poolConfigs(base []session.PoolConfig, objs []warrenv1.SandboxPool, nodeLabels map[string]string, runtimes []string) (cfgs []session.PoolConfig, selected map[string]bool, refused map[string]string) {
	out := slices.Clone(base)
	if out == nil {
		out = []session.PoolConfig{}
	}
	selected, refused = map[string]bool{}, map[string]string{}
	taken := func(tmpl string, network bool, runtime string) bool {
		return slices.ContainsFunc(out, func(c session.PoolConfig) bool {
			return c.Template == tmpl && c.Network == network && c.Runtime == runtime
		})
	}
	for _, o := range objs {
		s := o.Spec
		if o.DeletionTimestamp != nil || s.MinPerNode < 0 || !selects(s.NodeSelector, nodeLabels) || taken(s.Template, s.Network, s.Runtime) {
			continue
		}
		if s.Runtime != "" && runtimes != nil && !slices.Contains(runtimes, s.Runtime) {
			refused[o.Name] = fmt.Sprintf("runtime %s is not available on this node (it has: %s): the pool is not kept here", s.Runtime, strings.Join(runtimes, ", "))
			continue
		}
		c := session.PoolConfig{Template: s.Template, Min: int(s.MinPerNode), Max: int(s.MaxPerNode), Network: s.Network, Runtime: s.Runtime}
		if s.TTL != nil {
			c.TTL = s.TTL.Duration
		}
		out = append(out, c)
		selected[o.Name] = true
	}
	return out, selected, refused
}

// selects reports whether a node selector takes a node with these labels
// (no selector: every node; a malformed one: none).
func selects(sel *metav1.LabelSelector, nodeLabels map[string]string) bool {
	if sel == nil {
		return true
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return false
	}
	return s.Matches(labels.Set(nodeLabels))
}

func statsOf(stats []session.PoolStats, tmpl string, network bool) *session.PoolStats {
	for i := range stats {
		if stats[i].Template == tmpl && stats[i].Network == network {
			return &stats[i]
		}
	}
	return &session.PoolStats{Template: tmpl, Network: network}
}

// nodeLines sets (st non-nil) or removes (nil) the node's line among a
// pool's per-node lines, and says whether anything changed.
func nodeLines(old []warrenv1.SandboxPoolNodeStatus, node string, st *session.PoolStats) ([]warrenv1.SandboxPoolNodeStatus, bool) {
	i := slices.IndexFunc(old, func(l warrenv1.SandboxPoolNodeStatus) bool { return l.Node == node })
	if st == nil {
		if i < 0 {
			return old, false
		}
		return slices.Delete(slices.Clone(old), i, i+1), true
	}
	line := warrenv1.SandboxPoolNodeStatus{Node: node, Ready: int32(st.Ready), Hits: st.Hits, Misses: st.Misses, LastFailure: st.LastFailure}
	if i >= 0 {
		if old[i] == line {
			return old, false
		}
		out := slices.Clone(old)
		out[i] = line
		return out, true
	}
	out := append(slices.Clone(old), line)
	slices.SortFunc(out, func(a, b warrenv1.SandboxPoolNodeStatus) int {
		switch {
		case a.Node < b.Node:
			return -1
		case a.Node > b.Node:
			return 1
		}
		return 0
	})
	return out, true
}
