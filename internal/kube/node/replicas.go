package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	warrenv1 "github.com/warrenhq/warren/apis/warren/v1alpha1"
	"github.com/warrenhq/warren/internal/kube/fleet"
	"github.com/warrenhq/warren/internal/store"
)

// DefaultReplicaEvery is how often a node looks for the copies it keeps
// of other nodes' sandboxes that nobody needs any more.
const DefaultReplicaEvery = time.Minute

// replicaOf is the copy a node keeps of one sandbox of another node.
type replicaOf struct {
	Team, SandboxID string
	Newest          time.Time // its newest replica snapshot's
}

// sweepReplicas deletes the copies this node keeps of sandboxes whose
// objects no longer name it as their replica node: the sandbox was
// destroyed, or its copy is kept elsewhere now. The gateway's controller
// makes copies; only the node holding one can tell it is not needed.
func (n *Node) sweepReplicas(ctx context.Context) error {
	snaps, err := n.cfg.Sandboxes.ReplicaSnapshots(ctx)
	if err != nil || len(snaps) == 0 {
		return err
	}
	recs, err := n.cfg.Sandboxes.List(ctx, "", store.SandboxFilter{})
	if err != nil {
		return fmt.Errorf("list sandboxes: %w", err)
	}
	var errs []error
	for _, r := range keptReplicas(snaps, recs) {
		var objs warrenv1.SandboxList
		if err := n.cfg.Client.List(ctx, &objs, client.InNamespace(n.cfg.Namespace), client.MatchingLabels{fleet.LabelSandboxID: r.SandboxID}); err != nil {
			errs = append(errs, fmt.Errorf("list the Sandbox objects of sandbox %s: %w", r.SandboxID, err))
			continue
		}
		if !replicaUnneeded(n.cfg.Node, r, objs.Items, time.Now()) {
			continue
		}
		if err := n.cfg.Sandboxes.PruneReplicas(ctx, r.Team, r.SandboxID, 0); err != nil {
			errs = append(errs, err)
			continue
		}
		n.log.Info("node mode: deleted the copy of a sandbox this node no longer keeps", "sandbox", r.SandboxID)
	}
	return errors.Join(errs...)
}

// keptReplicas are the sandboxes of other nodes that the replica
// snapshots snaps are copies of (recs: the sandboxes this node holds,
// whose own replica snapshots their owner prunes).
func keptReplicas(snaps []store.Snapshot, recs []store.Sandbox) []replicaOf {
	held := map[string]bool{}
	for _, r := range recs {
		held[r.ID] = true
	}
	idx := map[string]int{}
	var out []replicaOf
	for _, s := range snaps {
		if held[s.SandboxID] {
			continue
		}
		i, ok := idx[s.SandboxID]
		if !ok {
			i = len(out)
			idx[s.SandboxID] = i
			out = append(out, replicaOf{Team: s.Team, SandboxID: s.SandboxID})
		}
		if s.CreatedAt.After(out[i].Newest) {
			out[i].Newest = s.CreatedAt
		}
	}
	return out
}

// replicaUnneeded: no object of the sandbox names node as its replica
// node, and the copy is old enough that the controller, which records a
// copy just after it is pulled, would have named it.
func replicaUnneeded(node string, r replicaOf, objs []warrenv1.Sandbox, now time.Time) bool {
	if now.Sub(r.Newest) < adoptGrace {
		return false
	}
	for _, o := range objs {
		if rep := o.Status.Replica; rep != nil && rep.Node == node && teamOf(o) == r.Team {
			return false
		}
	}
	return true
}
