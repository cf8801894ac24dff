//go:build kube

package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warrenv1 "github.com/warrenhq/warren/apis/warren/v1alpha1"
	"github.com/warrenhq/warren/internal/kube/fleet"
)

// warren node drain|uncordon: the cordon is a write of the WarrenNode's
// spec.unschedulable with the operator's own kubeconfig (the gateway has
// no right to it, and should not: taking a node out is the operator's
// call), and each sandbox moves through the gateway (--url), the one part
// that streams a sandbox between nodes and knows where every sandbox is.

type nodeFlags struct {
	kubeconfig string
	namespace  string
}

func nodeCmd(a *app) *cobra.Command {
	nf := &nodeFlags{}
	cmd := &cobra.Command{
		Use:   "node",
		Short: "Take a node of a warren fleet out of service and back (Kubernetes mode)",
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&nf.kubeconfig, "kubeconfig", "", "kubeconfig file of the fleet's cluster; empty = in-cluster config (env KUBECONFIG)")
	pf.StringVar(&nf.namespace, "kube-namespace", fleet.DefaultNamespace, "namespace of warren's Sandbox objects (env WARREN_KUBE_NAMESPACE)")
	fill := func(cmd *cobra.Command) {
		if !cmd.Flags().Changed("kubeconfig") {
			nf.kubeconfig = a.getenv("KUBECONFIG")
		}
		if v := a.getenv("WARREN_KUBE_NAMESPACE"); v != "" && !cmd.Flags().Changed("kube-namespace") {
			nf.namespace = v
		}
	}
	drain := &cobra.Command{
		Use:   "drain NODE",
		Short: "Cordon a node and move every sandbox off it through the gateway (--url)",
		Long: `Sets the WarrenNode's spec.unschedulable, then moves each of the node's sandboxes to another
node through the gateway at --url (an admin key). On gvisor the processes move: paused and
running sandboxes are hibernated on the node first, and every gvisor sandbox arrives hibernated, its
processes restored where they were by the next resume. Native sandboxes move their files: running
ones are stopped first, and they arrive paused, a resume starting their processes afresh. Stopped
ones move as they are. The metadata says warren.dev/moved-from and warren.dev/moved-with (memory or
files).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			fill(cmd)
			return a.drainNode(cmd.Context(), nf, args[0])
		},
	}
	uncordon := &cobra.Command{
		Use:   "uncordon NODE",
		Short: "Let placement put sandboxes on a node again",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			fill(cmd)
			kc, err := nf.client()
			if err != nil {
				return err
			}
			if err := setUnschedulable(cmd.Context(), kc, args[0], false); err != nil {
				return err
			}
			fmt.Fprintf(a.out, "node %s uncordoned\n", args[0])
			return nil
		},
	}
	cmd.AddCommand(drain, uncordon)
	return cmd
}

func (nf *nodeFlags) client() (client.Client, error) {
	kc, _, err := fleet.NewClient(nf.kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("reach the cluster (--kubeconfig): %w", err)
	}
	return kc, nil
}

// setUnschedulable cordons or uncordons node.
func setUnschedulable(ctx context.Context, kc client.Client, node string, on bool) error {
	var wn warrenv1.WarrenNode
	if err := kc.Get(ctx, client.ObjectKey{Name: node}, &wn); err != nil {
		return fmt.Errorf("WarrenNode %s: %w", node, err)
	}
	before := wn.DeepCopy()
	wn.Spec.Unschedulable = on
	if err := kc.Patch(ctx, &wn, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("set spec.unschedulable of WarrenNode %s: %w", node, err)
	}
	return nil
}

// drainNode cordons node and moves its sandboxes away, one at a time;
// the ones that could not move are named in the error.
func (a *app) drainNode(ctx context.Context, nf *nodeFlags, node string) error {
	kc, err := nf.client()
	if err != nil {
		return err
	}
	if err := setUnschedulable(ctx, kc, node, true); err != nil {
		return err
	}
	fmt.Fprintf(a.out, "node %s cordoned\n", node)
	var objs warrenv1.SandboxList
	if err := kc.List(ctx, &objs, client.InNamespace(nf.namespace)); err != nil {
		return fmt.Errorf("list the Sandbox objects of node %s: %w", node, err)
	}
	gw := a.client()
	var errs []error
	move, left := fleet.DrainList(objs.Items, node)
	for _, it := range left {
		fmt.Fprintf(a.out, "%s\t%s\tleft (only paused, hibernated, stopped and running sandboxes move)\n", it.ID, it.Phase)
	}
	for _, it := range move {
		// stop always: a drain moves a running sandbox anyway (its node
		// hibernates it on gvisor, else stops it), and the phase read may
		// lag a resume that came since.
		res, err := gw.Lifecycle.Move(ctx, it.ID, "", true)
		if err != nil {
			errs = append(errs, fmt.Errorf("sandbox %s (%s): %w", it.ID, it.Phase, err))
			continue
		}
		fmt.Fprintf(a.out, "%s\t%s\tmoved to %s in %.2fs\n", it.ID, it.Phase, res.To, res.Seconds)
	}
	if len(errs) > 0 {
		return fmt.Errorf("node %s is cordoned, but %d sandbox(es) did not move: %w", node, len(errs), errors.Join(errs...))
	}
	return nil
}
