package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
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
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/kube/fleet"
	"github.com/warrenhq/warren/internal/placement"
)

// Reasons of the Placed condition.
const (
	// ReasonNodeChosen: placement chose spec.nodeName.
	ReasonNodeChosen = "NodeChosen"
	// ReasonFleetFull: nodes could take the sandbox but have no room now.
	ReasonFleetFull = "FleetFull"
	// ReasonNoNodeFits: no node can take it (runtime, template, drained or
	// lost nodes); retried, since nodes come and change.
	ReasonNoNodeFits = "NoNodeFits"
)

// placer places Sandbox objects that have no spec.nodeName.
type placer struct {
	client   client.Client // the manager's cached client
	reader   client.Reader // the API server itself, to retry a conflict
	ns       string
	identity string
	policy   placement.Policy
	rng      *rand.Rand // one reconcile at a time (the builder's default)
	retryMin time.Duration
	retryMax time.Duration
	log      *slog.Logger

	mu       sync.Mutex
	attempts map[types.NamespacedName]int
	// assumed are placements made whose patch the cache may not show yet:
	// counted on their node so that a burst does not see it empty.
	assumed map[types.UID]assumption
}

type assumption struct {
	node string
	req  placement.Request
}

func (p *placer) setup(mgr ctrl.Manager) error {
	p.attempts, p.assumed = map[types.NamespacedName]int{}, map[types.UID]assumption{}
	unplaced := predicate.NewPredicateFuncs(func(o client.Object) bool {
		sb, ok := o.(*warrenv1.Sandbox)
		return ok && sb.Spec.NodeName == "" && sb.DeletionTimestamp == nil
	})
	// A node that joins or is uncordoned may take what fit nowhere: retry
	// those now rather than at their backoff's end. Status reports (every
	// 10 s from each node) do not count: they would retry them constantly.
	nodeChanged := predicate.Or(predicate.GenerationChangedPredicate{}, predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return true },
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("warren-placement").
		// Spec changes only: the controller's own Placed=False write
		// must not retry at once what it just backed off.
		For(&warrenv1.Sandbox{}, builder.WithPredicates(unplaced, predicate.GenerationChangedPredicate{})).
		Watches(&warrenv1.WarrenNode{}, handler.EnqueueRequestsFromMapFunc(p.unplacedSandboxes), builder.WithPredicates(nodeChanged)).
		Complete(p)
}

// unplacedSandboxes lists the Sandbox objects waiting for a node.
func (p *placer) unplacedSandboxes(ctx context.Context, _ client.Object) []reconcile.Request {
	var sbs warrenv1.SandboxList
	if err := p.client.List(ctx, &sbs, client.InNamespace(p.ns), client.UnsafeDisableDeepCopy); err != nil {
		p.log.Error("listing unplaced sandboxes", "err", err)
		return nil
	}
	var out []reconcile.Request
	for i := range sbs.Items {
		if sb := &sbs.Items[i]; sb.Spec.NodeName == "" && sb.DeletionTimestamp == nil {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(sb)})
		}
	}
	return out
}

// Reconcile places one Sandbox object.
func (p *placer) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var sb warrenv1.Sandbox
	if err := p.client.Get(ctx, req.NamespacedName, &sb); err != nil {
		p.forget(req.NamespacedName)
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if sb.Spec.NodeName != "" || sb.DeletionTimestamp != nil {
		p.forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	p.mu.Lock()
	_, done := p.assumed[sb.UID]
	p.mu.Unlock()
	if done {
		return ctrl.Result{}, nil // placed; the cache is behind
	}
	nodes, err := p.nodes(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	preq := RequestFromSandbox(&sb)
	d, err := p.policy.Choose(nodes, preq, p.rng)
	if err != nil {
		return p.unplaceable(ctx, &sb, err)
	}
	if err := p.bind(ctx, &sb, d, preq); err != nil {
		return ctrl.Result{}, err
	}
	p.log.Info("placed sandbox", "sandbox", req.NamespacedName, "decision", d.String())
	return ctrl.Result{}, nil
}

// bind writes the decision: spec.nodeName (only if still unset: another
// writer's choice wins), then the Placed condition.
func (p *placer) bind(ctx context.Context, sb *warrenv1.Sandbox, d placement.Decision, req placement.Request) error {
	orig := sb.DeepCopy()
	sb.Spec.NodeName = d.Node
	if err := p.client.Patch(ctx, sb, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("placing sandbox %s on %s: %w", sb.Name, d.Node, err)
	}
	p.mu.Lock()
	p.assumed[sb.UID] = assumption{node: d.Node, req: req}
	p.mu.Unlock()
	p.forget(client.ObjectKeyFromObject(sb))
	msg := fmt.Sprintf("%s, chosen by %s", d, p.identity)
	return p.setPlaced(ctx, sb, metav1.ConditionTrue, ReasonNodeChosen, msg)
}

// unplaceable records why no node can take sb and retries it later,
// backing off.
func (p *placer) unplaceable(ctx context.Context, sb *warrenv1.Sandbox, why error) (ctrl.Result, error) {
	reason := ReasonNoNodeFits
	if errors.Is(why, errdefs.ErrResourceExhausted) {
		reason = ReasonFleetFull
	}
	key := client.ObjectKeyFromObject(sb)
	p.mu.Lock()
	n := p.attempts[key]
	p.attempts[key] = n + 1
	p.mu.Unlock()
	delay := min(p.retryMin<<min(n, 20), p.retryMax)
	msg := fmt.Sprintf("%v; retrying in %v", why, delay)
	if err := p.setPlaced(ctx, sb, metav1.ConditionFalse, reason, msg); err != nil {
		return ctrl.Result{}, err
	}
	p.log.Info("sandbox not placed", "sandbox", sb.Namespace+"/"+sb.Name, "err", why, "retry", delay)
	return ctrl.Result{RequeueAfter: delay}, nil
}

// forget drops the backoff of a sandbox placed or gone.
func (p *placer) forget(key types.NamespacedName) {
	p.mu.Lock()
	delete(p.attempts, key)
	p.mu.Unlock()
}

// setPlaced sets the Placed condition (and phase Pending on an object no
// node has reported yet).
func (p *placer) setPlaced(ctx context.Context, sb *warrenv1.Sandbox, status metav1.ConditionStatus, reason, msg string) error {
	return patchStatus(ctx, p.client, p.reader, sb, func() bool {
		changed := meta.SetStatusCondition(&sb.Status.Conditions, condition(warrenv1.SandboxPlaced, status, reason, msg, sb.Generation))
		if sb.Status.Phase == "" {
			sb.Status.Phase, changed = warrenv1.SandboxPending, true
		}
		return changed
	})
}

// nodes is the fleet as placement sees it now, from the cache: each
// WarrenNode with its Lease, plus the sandboxes placed on it that it does
// not report yet, and the snapshots its Sandbox objects name.
func (p *placer) nodes(ctx context.Context) ([]placement.Node, error) {
	var wns warrenv1.WarrenNodeList
	if err := p.client.List(ctx, &wns, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing WarrenNodes: %w", err)
	}
	var leases coordinationv1.LeaseList
	if err := p.client.List(ctx, &leases, client.InNamespace(p.ns), client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing Leases: %w", err)
	}
	var sbs warrenv1.SandboxList
	if err := p.client.List(ctx, &sbs, client.InNamespace(p.ns), client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing Sandboxes: %w", err)
	}
	byName := make(map[string]*coordinationv1.Lease, len(leases.Items))
	for i := range leases.Items {
		byName[leases.Items[i].Name] = &leases.Items[i]
	}
	pending, snapshots := p.fromSandboxes(sbs.Items)
	now := time.Now()
	nodes := make([]placement.Node, len(wns.Items))
	for i := range wns.Items {
		wn := &wns.Items[i]
		var has func(string) bool
		if held := snapshots[wn.Name]; held != nil {
			has = func(id string) bool { _, ok := held[id]; return ok }
		}
		nodes[i] = NodeFromKube(wn, byName[fleet.LeaseName(wn.Name)], now, has)
		add(&nodes[i].Used, pending[wn.Name])
	}
	return nodes, nil
}

// fromSandboxes sums, per node, the sandboxes placed on it that it has not
// taken yet (its reported use does not count them), and gathers the
// snapshots each node's sandboxes were made from or last saved to.
func (p *placer) fromSandboxes(items []warrenv1.Sandbox) (map[string]placement.Resources, map[string]map[string]struct{}) {
	pending := map[string]placement.Resources{}
	snapshots := map[string]map[string]struct{}{}
	seen := make(map[types.UID]bool, len(items))
	for i := range items {
		sb := &items[i]
		seen[sb.UID] = sb.Spec.NodeName != ""
		if sb.Spec.NodeName != "" && sb.Status.SandboxID == "" {
			r := pending[sb.Spec.NodeName]
			add(&r, request(RequestFromSandbox(sb)))
			pending[sb.Spec.NodeName] = r
		}
		if node := sb.Status.Node; node != "" {
			for _, id := range []string{sb.Status.LastSnapshot, sb.Spec.FromSnapshot} {
				if id == "" {
					continue
				}
				if snapshots[node] == nil {
					snapshots[node] = map[string]struct{}{}
				}
				snapshots[node][id] = struct{}{}
			}
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for uid, a := range p.assumed {
		placed, exists := seen[uid]
		switch {
		case !exists || placed:
			// Gone, or the cache shows the placement (counted above).
			delete(p.assumed, uid)
		default:
			r := pending[a.node]
			add(&r, request(a.req))
			pending[a.node] = r
		}
	}
	return pending, snapshots
}

// request is what a placed sandbox takes of its node.
func request(r placement.Request) placement.Resources {
	return placement.Resources{MemoryBytes: r.MemoryBytes, MilliCPU: r.MilliCPU, DiskBytes: r.DiskBytes, Sandboxes: 1}
}

func add(to *placement.Resources, r placement.Resources) {
	to.MemoryBytes += r.MemoryBytes
	to.MilliCPU += r.MilliCPU
	to.DiskBytes += r.DiskBytes
	to.Sandboxes += r.Sandboxes
}
