package node

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	warrenv1 "github.com/warrenhq/warren/apis/warren/v1alpha1"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/kube/fleet"
	"github.com/warrenhq/warren/internal/store"
)

// syncSandboxes is one pass of the sandbox sync: it reads the node's
// Sandbox objects, then its records, and carries out planSync's plan. An
// error in one object does not hold up the others.
func (n *Node) syncSandboxes(ctx context.Context) error {
	var objs warrenv1.SandboxList
	if err := n.cfg.Client.List(ctx, &objs, client.InNamespace(n.cfg.Namespace),
		client.MatchingFields{"spec.nodeName": n.cfg.Node}); err != nil {
		return fmt.Errorf("list Sandbox objects: %w", err)
	}
	recs, err := n.cfg.Sandboxes.List(ctx, "", store.SandboxFilter{})
	if err != nil {
		return fmt.Errorf("list sandboxes: %w", err)
	}
	p := planSync(n.cfg.Node, objs.Items, recs, n.creates.has)
	var errs []error
	for _, pub := range p.publish {
		errs = append(errs, n.publish(ctx, pub))
	}
	for _, k := range p.kill {
		errs = append(errs, n.kill(ctx, k))
	}
	for _, o := range p.release {
		errs = append(errs, n.release(ctx, o))
	}
	for _, o := range p.start {
		n.creates.start(string(o.UID), func() { n.startSandbox(ctx, o) })
	}
	return errors.Join(errs...)
}

// publish makes a record's object, or brings its labels, finalizer and
// status up to date; it writes only what changed.
func (n *Node) publish(ctx context.Context, pub publication) error {
	o := pub.Object
	if o.UID == "" {
		o = newObject(n.cfg.Namespace, n.cfg.Node, pub.Record)
		if err := n.cfg.Client.Create(ctx, &o); apierrors.IsAlreadyExists(err) {
			return n.elsewhere(ctx, pub.Record)
		} else if err != nil {
			return fmt.Errorf("create Sandbox object %s: %w", o.Name, err)
		}
	} else if want := desiredLabels(o.Labels, n.cfg.Node, pub.Record, o.UID); !maps.Equal(want, o.Labels) || !controllerutil.ContainsFinalizer(&o, fleet.Finalizer) {
		before := o.DeepCopy()
		o.Labels = want
		controllerutil.AddFinalizer(&o, fleet.Finalizer)
		if err := n.cfg.Client.Patch(ctx, &o, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			return fmt.Errorf("label Sandbox object %s: %w", o.Name, err)
		}
	}
	want := desiredStatus(o.Status, o.Generation, n.cfg.Node, n.cfg.Endpoint, pub.Record)
	if !statusDiffers(o.Status, want) {
		return nil
	}
	o.Status = want
	if err := n.cfg.Client.Status().Update(ctx, &o); err != nil {
		return fmt.Errorf("status of Sandbox object %s: %w", o.Name, err)
	}
	return nil
}

// elsewhere handles a sandbox whose object, named by its id, exists but
// is not this node's: once a node that was lost is back, the sandboxes
// restored elsewhere meanwhile are destroyed here (nothing runs twice).
func (n *Node) elsewhere(ctx context.Context, rec store.Sandbox) error {
	var o warrenv1.Sandbox
	if err := n.cfg.Client.Get(ctx, objectKey(n.cfg.Namespace, rec.ID), &o); apierrors.IsNotFound(err) {
		return nil // gone meanwhile: the next pass makes it
	} else if err != nil {
		return fmt.Errorf("read Sandbox object %s, which exists but is not this node's: %w", rec.ID, err)
	}
	if !staleCopy(n.cfg.Node, o, rec, time.Now()) {
		return fmt.Errorf("sandbox %s: its object %s names node %q, not this one (%s); left as it is: %w", rec.ID, o.Name, o.Spec.NodeName, n.cfg.Node, errdefs.ErrConflict)
	}
	// Forget, not Delete: when a move repointed the object, the snapshots
	// the move took here go too, whichever of this pass and the gateway's
	// forget call comes first.
	if err := n.cfg.Sandboxes.Forget(ctx, rec.ID); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("destroy the stale copy of sandbox %s, which runs on node %s now: %w", rec.ID, o.Spec.NodeName, err)
	}
	if err := n.cfg.Sandboxes.PruneReplicas(ctx, rec.Team, rec.ID, 0); err != nil {
		n.log.Warn("node mode: could not delete the replica snapshots of a stale sandbox", "sandbox", rec.ID, "err", err)
	}
	n.log.Warn("node mode: destroyed this node's stale copy of a sandbox that lives on another node now (restored or moved there while this node was away)",
		"sandbox", rec.ID, "state", rec.State, "node", o.Spec.NodeName)
	return nil
}

// kill destroys a sandbox whose object is being deleted (then lets the
// object go) or is gone.
func (n *Node) kill(ctx context.Context, k killing) error {
	if err := n.cfg.Sandboxes.Delete(ctx, k.Record.Team, k.Record.ID); err != nil && !errdefs.IsNotFound(err) {
		return fmt.Errorf("kill sandbox %s, whose Sandbox object was deleted: %w", k.Record.ID, err)
	}
	n.log.Info("node mode: killed a sandbox whose Sandbox object was deleted", "sandbox", k.Record.ID)
	if k.Object == nil {
		return nil
	}
	return n.release(ctx, *k.Object)
}

// release lets go of an object whose sandbox is gone: the finalizer off,
// and the object deleted unless it is already being deleted.
func (n *Node) release(ctx context.Context, o warrenv1.Sandbox) error {
	if controllerutil.ContainsFinalizer(&o, fleet.Finalizer) {
		before := o.DeepCopy()
		controllerutil.RemoveFinalizer(&o, fleet.Finalizer)
		if err := n.cfg.Client.Patch(ctx, &o, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); ignoreGone(err) != nil {
			return fmt.Errorf("remove the finalizer of Sandbox object %s: %w", o.Name, err)
		}
	}
	if o.DeletionTimestamp == nil {
		if err := n.cfg.Client.Delete(ctx, &o, client.Preconditions{UID: &o.UID}); ignoreGone(err) != nil {
			return fmt.Errorf("delete Sandbox object %s: %w", o.Name, err)
		}
	}
	return nil
}

// startSandbox makes the sandbox a Sandbox object assigned to the node
// asks for. The finalizer goes on first, so that a delete of the object
// during the create still kills the sandbox; a failed create is written to
// the object's status and not retried until its spec changes.
func (n *Node) startSandbox(ctx context.Context, o warrenv1.Sandbox) {
	if !controllerutil.ContainsFinalizer(&o, fleet.Finalizer) {
		before := o.DeepCopy()
		controllerutil.AddFinalizer(&o, fleet.Finalizer)
		if err := n.cfg.Client.Patch(ctx, &o, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			n.log.Warn("node mode: could not take Sandbox object; retrying", "object", o.Name, "err", err)
			return
		}
	}
	// A create that has begun finishes even if the node is stopping (Close
	// waits for it): cut short, it would leave a failed sandbox behind.
	rec, err := n.cfg.Sandboxes.Create(context.WithoutCancel(ctx), createRequest(o))
	if err != nil {
		n.log.Warn("node mode: could not create the sandbox of a Sandbox object", "object", o.Name, "err", err)
		if err := n.writeFailed(ctx, o, err); err != nil {
			n.log.Warn("node mode: could not write a failed create to its object", "object", o.Name, "err", err)
		}
		return
	}
	n.log.Info("node mode: created the sandbox of a Sandbox object", "object", o.Name, "sandbox", rec.ID)
	n.Nudge()
}

// writeFailed marks an object whose sandbox could not be made.
func (n *Node) writeFailed(ctx context.Context, o warrenv1.Sandbox, cause error) error {
	o.Status.Phase = warrenv1.SandboxFailed
	o.Status.Node = n.cfg.Node
	o.Status.ObservedGeneration = o.Generation
	meta.SetStatusCondition(&o.Status.Conditions, metav1.Condition{
		Type: warrenv1.SandboxReady, Status: metav1.ConditionFalse, Reason: "CreateFailed",
		Message: cause.Error(), ObservedGeneration: o.Generation,
	})
	return n.cfg.Client.Status().Update(ctx, &o)
}

// objectKey names an object (namespace "" for cluster-scoped ones).
func objectKey(namespace, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: namespace, Name: name}
}
