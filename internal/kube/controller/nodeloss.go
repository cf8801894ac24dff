package controller

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	warrenv1 "github.com/warrenhq/warren/apis/warren/v1alpha1"
	"github.com/warrenhq/warren/internal/kube/fleet"
)

// Reasons the node-loss loop writes.
const (
	// ReasonLeaseExpired: the node's Ready condition, once its Lease lapsed.
	ReasonLeaseExpired = "LeaseExpired"
	// ReasonNodeLost: a Sandbox's Ready condition, once its node's Lease
	// lapsed.
	ReasonNodeLost = "NodeLost"
)

// statusNodeIndex indexes Sandbox objects by status.node.
const statusNodeIndex = "status.node"

// leasePrefix is what fleet.LeaseName puts before a node's name.
var leasePrefix = fleet.LeaseName("")

// indexSandboxes lets the cache list a node's Sandbox objects.
func indexSandboxes(ctx context.Context, mgr manager.Manager) error {
	err := mgr.GetFieldIndexer().IndexField(ctx, &warrenv1.Sandbox{}, statusNodeIndex, func(o client.Object) []string {
		if node := o.(*warrenv1.Sandbox).Status.Node; node != "" {
			return []string{node}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("indexing Sandboxes by node: %w", err)
	}
	return nil
}

// lossWatcher marks a node whose Lease lapsed not Ready and its sandboxes
// Lost. It is driven by each Lease's expiry: a live Lease is looked at again
// the moment it would lapse (and whenever it or one of its node's Sandbox
// objects changes), so detection is as quick as the API server's writes.
type lossWatcher struct {
	client client.Client
	reader client.Reader
	ns     string
	log    *slog.Logger
}

func (w *lossWatcher) setup(mgr ctrl.Manager) error {
	nodeLeases := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetNamespace() == w.ns && strings.HasPrefix(o.GetName(), leasePrefix)
	})
	// A Sandbox written after its node's Lease lapsed (its node's last
	// report, a kubectl edit) is looked at too.
	leaseOfSandbox := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		sb, ok := o.(*warrenv1.Sandbox)
		if !ok || sb.Status.Node == "" || lostOrGone(sb.Status.Phase) {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: w.ns, Name: fleet.LeaseName(sb.Status.Node)}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("warren-node-loss").
		For(&coordinationv1.Lease{}, builder.WithPredicates(nodeLeases)).
		Watches(&warrenv1.Sandbox{}, leaseOfSandbox).
		Complete(w)
}

// Reconcile looks at one node's Lease.
func (w *lossWatcher) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var lease coordinationv1.Lease
	if err := w.client.Get(ctx, req.NamespacedName, &lease); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	expiry, ok := LeaseExpiry(&lease)
	if !ok {
		return ctrl.Result{}, nil
	}
	if wait := time.Until(expiry); wait > 0 {
		// A few ms past: the timer must not fire just before the expiry.
		return ctrl.Result{RequeueAfter: wait + 5*time.Millisecond}, nil
	}
	node := strings.TrimPrefix(lease.Name, leasePrefix)
	if err := w.nodeNotReady(ctx, node, expiry); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, w.sandboxesLost(ctx, node, expiry)
}

// nodeNotReady sets the WarrenNode's Ready condition False (the node sets it
// True again when it is back).
func (w *lossWatcher) nodeNotReady(ctx context.Context, node string, expiry time.Time) error {
	var wn warrenv1.WarrenNode
	if err := w.client.Get(ctx, client.ObjectKey{Name: node}, &wn); err != nil {
		return client.IgnoreNotFound(err)
	}
	if c := meta.FindStatusCondition(wn.Status.Conditions, warrenv1.NodeReady); c != nil &&
		c.Status == metav1.ConditionFalse && c.Reason == ReasonLeaseExpired {
		return nil
	}
	msg := fmt.Sprintf("the node's Lease %s/%s lapsed at %s", w.ns, fleet.LeaseName(node), expiry.UTC().Format(time.RFC3339Nano))
	err := patchStatus(ctx, w.client, w.reader, &wn, func() bool {
		return meta.SetStatusCondition(&wn.Status.Conditions, condition(warrenv1.NodeReady, metav1.ConditionFalse, ReasonLeaseExpired, msg, wn.Generation))
	})
	if err != nil {
		return fmt.Errorf("marking node %s not ready: %w", node, err)
	}
	w.log.Warn("node lost: its lease lapsed", "node", node, "expired", expiry)
	return nil
}

// sandboxesLost turns every sandbox the node held Lost, keeping
// status.lastSnapshot: what another node can restore it from.
func (w *lossWatcher) sandboxesLost(ctx context.Context, node string, expiry time.Time) error {
	var sbs warrenv1.SandboxList
	if err := w.client.List(ctx, &sbs, client.InNamespace(w.ns), client.MatchingFields{statusNodeIndex: node}); err != nil {
		return fmt.Errorf("listing the sandboxes of node %s: %w", node, err)
	}
	msg := fmt.Sprintf("node %s stopped renewing its Lease (lapsed at %s)", node, expiry.UTC().Format(time.RFC3339Nano))
	for i := range sbs.Items {
		sb := &sbs.Items[i]
		if lostOrGone(sb.Status.Phase) {
			continue
		}
		err := patchStatus(ctx, w.client, w.reader, sb, func() bool {
			if lostOrGone(sb.Status.Phase) || sb.Status.Node != node {
				return false
			}
			sb.Status.Phase = warrenv1.SandboxLost
			m := msg
			if r := sb.Status.Replica; r != nil && r.Node != node {
				m += fmt.Sprintf("; a connect restores it on node %s from its copy of %s (snapshot %s)", r.Node, r.At.UTC().Format(time.RFC3339), r.Snapshot)
			} else {
				m += "; no other node holds a copy of it: it comes back only with its node"
			}
			meta.SetStatusCondition(&sb.Status.Conditions, condition(warrenv1.SandboxReady, metav1.ConditionFalse, ReasonNodeLost, m, sb.Generation))
			return true
		})
		if err != nil {
			return fmt.Errorf("marking sandbox %s lost: %w", sb.Name, err)
		}
		w.log.Warn("sandbox lost with its node", "sandbox", sb.Namespace+"/"+sb.Name, "node", node, "lastSnapshot", sb.Status.LastSnapshot)
	}
	return nil
}

// patchStatus applies change to obj's status and writes it, re-reading
// obj from the API server and applying again when a concurrent write (the
// node's own reports) got there first: the condition list is written whole,
// so a blind write would drop the other writer's conditions. change returns
// false when nothing is left to write.
func patchStatus(ctx context.Context, c client.Client, reader client.Reader, obj client.Object, change func() bool) error {
	first := true
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if !first {
			if err := reader.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
				return client.IgnoreNotFound(err)
			}
		}
		first = false
		orig := obj.DeepCopyObject().(client.Object)
		if !change() {
			return nil
		}
		return c.Status().Patch(ctx, obj, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{}))
	})
}

// lostOrGone says whether a sandbox in phase needs no marking.
func lostOrGone(phase warrenv1.SandboxPhase) bool {
	return phase == warrenv1.SandboxLost || phase == warrenv1.SandboxDestroyed
}
