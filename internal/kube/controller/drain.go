package controller

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	warrenv1 "github.com/warrenhq/warren/apis/warren/v1alpha1"
	"github.com/warrenhq/warren/internal/kube/fleet"
)

// kubectl drain cordons a Node and evicts its pods, but not DaemonSet pods:
// the warren node stays, and so would its sandboxes. The drainer is the
// hook: it mirrors a Node's cordon onto its WarrenNode (condition Cordoned,
// which placement avoids) and, when the cordon is meant as a drain (the
// Node's warren.dev/drain annotation, else --drain-on-cordon), moves the
// node's sandboxes off one at a time through the gateway's mover, the
// same path as warren node drain. An uncordon clears both conditions and
// stops a drain under way before its next move.

// Mover moves a sandbox off its node to one the gateway picks (the
// gateway's MoveOff); it stops a running sandbox first.
type Mover interface {
	MoveOff(ctx context.Context, id string) (to string, err error)
}

// Reasons the drainer writes.
const (
	ReasonNodeCordoned    = "NodeCordoned"
	ReasonDraining        = "Draining"
	ReasonDrained         = "Drained"
	ReasonDrainIncomplete = "DrainIncomplete"
)

// Timing of drains: one move's deadline, and when a drain some of whose
// sandboxes did not move is tried again.
const (
	drainMoveTimeout = 15 * time.Minute
	drainRetry       = 30 * time.Second
)

// drainAction is what a Node's state asks of its warren node.
type drainAction int

const (
	drainNone       drainAction = iota // schedulable: nothing
	drainCordonOnly                    // cordoned: no new sandboxes
	drainMove                          // cordoned as a drain: move them off
)

// drainDecision is what a Node's cordon means: a cordon alone keeps new
// sandboxes off (it often only stops new pods, before an inspection or a
// reboot that the sandboxes may well outlive); it drains when the Node is
// annotated warren.dev/drain=true, or with onCordon unless annotated
// "false". why says so, for the Cordoned condition.
func drainDecision(unschedulable bool, annotation string, onCordon bool) (drainAction, string) {
	if !unschedulable {
		return drainNone, ""
	}
	if annotation == "" {
		if onCordon {
			return drainMove, "the Kubernetes Node is cordoned, and the gateway drains cordoned nodes (--drain-on-cordon)"
		}
		return drainCordonOnly, "the Kubernetes Node is cordoned: no new sandboxes; annotate it " + fleet.DrainAnnotation + "=true to move its sandboxes off"
	}
	drain, err := strconv.ParseBool(annotation)
	switch {
	case err != nil:
		return drainCordonOnly, fmt.Sprintf("the Kubernetes Node is cordoned; its annotation %s=%q is not true or false, so nothing is moved", fleet.DrainAnnotation, annotation)
	case drain:
		return drainMove, "the Kubernetes Node is cordoned and annotated " + fleet.DrainAnnotation + "=true"
	default:
		return drainCordonOnly, "the Kubernetes Node is cordoned and annotated " + fleet.DrainAnnotation + "=false: no new sandboxes, the ones there stay"
	}
}

// drainer follows the Kubernetes Nodes of warren nodes.
type drainer struct {
	client   client.Client
	reader   client.Reader
	ns       string
	onCordon bool
	mover    Mover
	log      *slog.Logger
}

// setupDrainer registers the drainer when the controller has a mover and
// may read Nodes. Without that right (a gateway upgraded before its RBAC)
// the Node informer would never sync and fail the whole term, placement
// and node loss with it: the drainer is left out and the gap logged.
func (c *Controller) setupDrainer(ctx context.Context, mgr ctrl.Manager) error {
	if c.opts.Mover == nil {
		return nil
	}
	if err := mgr.GetAPIReader().List(ctx, &corev1.NodeList{}, client.Limit(1)); apierrors.IsForbidden(err) {
		c.log.Error("the gateway may not list Nodes (its ClusterRole lacks nodes get/list/watch): a cordon or kubectl drain of a node moves none of its sandboxes", "err", err)
		return nil
	}
	d := &drainer{client: mgr.GetClient(), reader: mgr.GetAPIReader(), ns: c.opts.Namespace,
		onCordon: c.opts.DrainOnCordon, mover: c.opts.Mover, log: c.log}
	return d.setup(mgr)
}

func (d *drainer) setup(mgr ctrl.Manager) error {
	// A Node's status changes with every kubelet heartbeat; only its
	// cordon and annotation matter here.
	cordonChanged := predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, ok1 := e.ObjectOld.(*corev1.Node)
			n, ok2 := e.ObjectNew.(*corev1.Node)
			return ok1 && ok2 && (o.Spec.Unschedulable != n.Spec.Unschedulable ||
				o.Annotations[fleet.DrainAnnotation] != n.Annotations[fleet.DrainAnnotation])
		},
		DeleteFunc: func(event.DeleteEvent) bool { return false },
	}
	// A WarrenNode that appears after its Node was cordoned, or a sandbox
	// that lands on a draining node, is looked at with the Node.
	nodeOfWarrenNode := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: o.GetName()}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("warren-drain").
		For(&corev1.Node{}, builder.WithPredicates(cordonChanged)).
		Watches(&warrenv1.WarrenNode{}, nodeOfWarrenNode).
		Complete(d)
}

// Reconcile brings one Node's cordon to its warren node.
func (d *drainer) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var kn corev1.Node
	if err := d.client.Get(ctx, req.NamespacedName, &kn); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	var wn warrenv1.WarrenNode
	if err := d.client.Get(ctx, client.ObjectKey{Name: kn.Name}, &wn); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err) // no warren node on it
	}
	action, why := drainDecision(kn.Spec.Unschedulable, kn.Annotations[fleet.DrainAnnotation], d.onCordon)
	if err := d.markCordon(ctx, &wn, action, why); err != nil {
		return ctrl.Result{}, err
	}
	if action != drainMove {
		return ctrl.Result{}, nil
	}
	return d.drain(ctx, &wn)
}

// markCordon writes the Cordoned condition, and drops Drained when the
// node is no longer to be drained.
func (d *drainer) markCordon(ctx context.Context, wn *warrenv1.WarrenNode, action drainAction, why string) error {
	err := patchStatus(ctx, d.client, d.reader, wn, func() bool {
		if action == drainNone {
			a := meta.RemoveStatusCondition(&wn.Status.Conditions, fleet.NodeCordoned)
			b := meta.RemoveStatusCondition(&wn.Status.Conditions, fleet.NodeDrained)
			return a || b
		}
		changed := meta.SetStatusCondition(&wn.Status.Conditions, condition(fleet.NodeCordoned, metav1.ConditionTrue, ReasonNodeCordoned, why, wn.Generation))
		if action == drainCordonOnly && meta.RemoveStatusCondition(&wn.Status.Conditions, fleet.NodeDrained) {
			changed = true
		}
		return changed
	})
	if err != nil {
		return fmt.Errorf("mark the cordon of node %s: %w", wn.Name, err)
	}
	return nil
}

// drain moves the node's sandboxes off, one at a time, writing its
// progress into the Drained condition; it stops before the next move once
// the Node is no longer to be drained.
func (d *drainer) drain(ctx context.Context, wn *warrenv1.WarrenNode) (ctrl.Result, error) {
	var objs warrenv1.SandboxList
	if err := d.client.List(ctx, &objs, client.InNamespace(d.ns)); err != nil {
		return ctrl.Result{}, fmt.Errorf("list the Sandbox objects of node %s: %w", wn.Name, err)
	}
	move, left := fleet.DrainList(objs.Items, wn.Name)
	move, err := d.stillToMove(ctx, move, wn.Name)
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(move) == 0 {
		// Nothing is left to move: a drain that ended keeps its count
		// rather than being rewritten as "0 of 0" by the pass its own
		// status write starts.
		if done, err := d.drainedAlready(ctx, wn.Name); err != nil || done {
			return ctrl.Result{}, err
		}
	}
	t := drainTally{total: len(move), left: len(left)}
	if err := d.markDrain(ctx, wn, &t); err != nil {
		return ctrl.Result{}, err
	}
	if len(move) > 0 {
		d.log.Info("draining a cordoned node", "node", wn.Name, "sandboxes", len(move), "left", len(left))
	}
	for _, it := range move {
		if on, err := d.stillDraining(ctx, wn.Name); err != nil || !on {
			t.interrupted = err == nil
			if err != nil {
				return ctrl.Result{}, err
			}
			break
		}
		if here, err := d.stillOn(ctx, it, wn.Name); err != nil || !here {
			if err != nil {
				return ctrl.Result{}, err
			}
			t.total-- // moved meanwhile (the cache lags a move's repoint)
			continue
		}
		mctx, cancel := context.WithTimeout(ctx, drainMoveTimeout)
		to, err := d.mover.MoveOff(mctx, it.ID)
		cancel()
		t.add(it, err)
		if err != nil {
			d.log.Warn("a drain could not move a sandbox", "node", wn.Name, "sandbox", it.ID, "err", err)
		} else {
			d.log.Info("drain moved a sandbox", "node", wn.Name, "sandbox", it.ID, "to", to)
		}
		if err := d.markDrain(ctx, wn, &t); err != nil {
			return ctrl.Result{}, err
		}
	}
	t.finished = !t.interrupted
	if t.interrupted {
		return ctrl.Result{}, nil // markCordon of the uncordon clears the condition
	}
	if err := d.markDrain(ctx, wn, &t); err != nil {
		return ctrl.Result{}, err
	}
	if t.failed > 0 {
		return ctrl.Result{RequeueAfter: drainRetry}, nil
	}
	return ctrl.Result{}, nil
}

// stillDraining reads the Node from the API server (not the cache: an
// uncordon must stop the next move at once) and says whether it is still
// to be drained.
func (d *drainer) stillDraining(ctx context.Context, name string) (bool, error) {
	var kn corev1.Node
	if err := d.reader.Get(ctx, client.ObjectKey{Name: name}, &kn); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	action, _ := drainDecision(kn.Spec.Unschedulable, kn.Annotations[fleet.DrainAnnotation], d.onCordon)
	return action == drainMove, nil
}

// stillToMove keeps the items still on node by the API server: the cache
// may not have seen the repoints of the moves that just ended.
func (d *drainer) stillToMove(ctx context.Context, items []fleet.DrainItem, node string) ([]fleet.DrainItem, error) {
	var out []fleet.DrainItem
	for _, it := range items {
		here, err := d.stillOn(ctx, it, node)
		if err != nil {
			return nil, err
		}
		if here {
			out = append(out, it)
		}
	}
	return out, nil
}

// drainedAlready reads the WarrenNode from the API server (the cache may
// lag the Drained condition a drain just wrote) and says whether its
// drain has ended with every sandbox moved.
func (d *drainer) drainedAlready(ctx context.Context, name string) (bool, error) {
	var wn warrenv1.WarrenNode
	if err := d.reader.Get(ctx, client.ObjectKey{Name: name}, &wn); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return meta.IsStatusConditionTrue(wn.Status.Conditions, fleet.NodeDrained), nil
}

// stillOn reads a sandbox's object from the API server and says whether it
// is still node's: the cache may not have seen the repoint of a move that
// just ended, and moving that sandbox again would take it off the node it
// was just moved to.
func (d *drainer) stillOn(ctx context.Context, it fleet.DrainItem, node string) (bool, error) {
	var sb warrenv1.Sandbox
	if err := d.reader.Get(ctx, client.ObjectKey{Namespace: d.ns, Name: it.Object}, &sb); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return sb.Spec.NodeName == node && sb.DeletionTimestamp == nil, nil
}

// markDrain writes t into the Drained condition.
func (d *drainer) markDrain(ctx context.Context, wn *warrenv1.WarrenNode, t *drainTally) error {
	status, reason := t.condition()
	err := patchStatus(ctx, d.client, d.reader, wn, func() bool {
		return meta.SetStatusCondition(&wn.Status.Conditions, condition(fleet.NodeDrained, status, reason, t.message(), wn.Generation))
	})
	if err != nil {
		return fmt.Errorf("mark the drain of node %s: %w", wn.Name, err)
	}
	return nil
}

// drainTally counts a drain's sandboxes.
type drainTally struct {
	total, left int
	// moved counts every sandbox moved; stopped and hibernated, the running
	// ones among them that their node stopped or hibernated first.
	moved, stopped, hibernated int
	failed                     int
	lastErr                    string
	finished, interrupted      bool
}

func (t *drainTally) add(it fleet.DrainItem, err error) {
	if err != nil {
		t.failed++
		t.lastErr = fmt.Sprintf("sandbox %s: %v", it.ID, err)
		return
	}
	t.moved++
	if it.Phase == warrenv1.SandboxRunning {
		if it.Runtime == warrenv1.RuntimeGVisor {
			t.hibernated++
		} else {
			t.stopped++
		}
	}
}

// condition is the Drained condition's status and reason for t.
func (t *drainTally) condition() (metav1.ConditionStatus, string) {
	switch {
	case !t.finished:
		return metav1.ConditionFalse, ReasonDraining
	case t.failed > 0:
		return metav1.ConditionFalse, ReasonDrainIncomplete
	}
	return metav1.ConditionTrue, ReasonDrained
}

// message says how far the drain got, in numbers.
func (t *drainTally) message() string {
	var b strings.Builder
	if !t.finished {
		fmt.Fprintf(&b, "draining: ")
	}
	fmt.Fprintf(&b, "%d of %d sandboxes moved (%d stopped first, %d hibernated first), %d failed", t.moved, t.total, t.stopped, t.hibernated, t.failed)
	if t.left > 0 {
		fmt.Fprintf(&b, ", %d left where they are (creating, failed or lost)", t.left)
	}
	if t.lastErr != "" {
		fmt.Fprintf(&b, "; last failure: %s", t.lastErr)
	}
	if t.finished && t.failed > 0 {
		fmt.Fprintf(&b, "; tried again in %s", drainRetry)
	}
	return b.String()
}
