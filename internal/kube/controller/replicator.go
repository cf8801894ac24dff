package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	warrenv1 "github.com/warrenhq/warren/apis/warren/v1alpha1"
	"github.com/warrenhq/warren/internal/kube/fleet"
	"github.com/warrenhq/warren/internal/placement"
)

// A dead node's disk cannot be read, so a sandbox outlives its node only if
// a copy was made before: the replicator keeps, for every paused or
// hibernated sandbox, a copy of its files and record on one other node,
// chosen by placement (capacity, spread; a node that can run its runtime).
// The owner takes a replica snapshot (POST /sandboxes/{id}/replica), the
// replica node pulls it from the owner, node to node, as a delta against
// the previous copy both hold (POST /sandboxes/{id}/replica/pull), and the
// Sandbox's status.replica records it. A running sandbox is not copied:
// its files change under it, and snapshotting it on a timer would cost
// every running sandbox a freeze; its last copy (from its last pause)
// stays, and is what a restore brings back if its node is lost while it
// runs. A copy is made again once the sandbox paused after it, or when its
// replica node is lost.

// replicaRecheck is how often an at-rest sandbox's copy is looked at again
// (its replica node may have been lost since).
const replicaRecheck = 30 * time.Second

// replicator keeps the copies of sandboxes at rest.
type replicator struct {
	client client.Client // the manager's cached client
	reader client.Reader // the API server itself: the fleet's admin key, conflicts
	ns     string
	policy placement.Policy
	http   *http.Client
	log    *slog.Logger

	mu  sync.Mutex
	rng *rand.Rand
}

// replicaWorkers is how many sandboxes are copied at once.
const replicaWorkers = 2

func (p *replicator) setup(mgr ctrl.Manager) error {
	atRest := predicate.NewPredicateFuncs(func(o client.Object) bool {
		sb, ok := o.(*warrenv1.Sandbox)
		return ok && atRestPhase(sb.Status.Phase) && sb.DeletionTimestamp == nil
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("warren-replication").
		For(&warrenv1.Sandbox{}, builder.WithPredicates(atRest)).
		WithOptions(controller.Options{MaxConcurrentReconciles: replicaWorkers}).
		Complete(p)
}

// atRestPhase: a sandbox in phase has files that do not change, and is
// copied.
func atRestPhase(phase warrenv1.SandboxPhase) bool {
	return phase == warrenv1.SandboxPaused || phase == warrenv1.SandboxHibernated
}

// Reconcile copies one sandbox if its copy is missing or out of date.
func (p *replicator) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var sb warrenv1.Sandbox
	if err := p.client.Get(ctx, req.NamespacedName, &sb); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !atRestPhase(sb.Status.Phase) || sb.DeletionTimestamp != nil || sb.Status.SandboxID == "" {
		return ctrl.Result{}, nil
	}
	nodes, err := p.fleet(ctx, false)
	if err != nil {
		return ctrl.Result{}, err
	}
	owner, ok := liveNode(nodes, sb.Status.Node)
	if !ok {
		return ctrl.Result{RequeueAfter: replicaRecheck}, nil // the loss watcher's case
	}
	if !replicaDue(&sb, func(n string) bool { _, ok := liveNode(nodes, n); return ok }) {
		return ctrl.Result{RequeueAfter: replicaRecheck}, nil
	}
	target, err := p.target(ctx, &sb, nodes)
	if err != nil {
		p.log.Warn("no node to keep a sandbox's replica on", "sandbox", sb.Status.SandboxID, "err", err)
		return ctrl.Result{RequeueAfter: replicaRecheck}, nil
	}
	began := time.Now()
	rep, err := p.replicate(ctx, &sb, owner, target)
	if errdefs.IsConflict(err) {
		// The owner says the sandbox runs again (or is moving): the
		// object's phase was behind; its next status write brings it back.
		p.log.Debug("a sandbox is not at rest on its node any more; not copied", "sandbox", sb.Status.SandboxID, "err", err)
		return ctrl.Result{RequeueAfter: replicaRecheck}, nil
	}
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("replicate sandbox %s from node %s to node %s: %w", sb.Status.SandboxID, owner.Name, target.Name, err)
	}
	if err := p.record(ctx, &sb, owner.Name, rep); err != nil {
		return ctrl.Result{}, err
	}
	p.log.Info("replicated a sandbox at rest", "sandbox", sb.Status.SandboxID, "owner", owner.Name, "replica", target.Name,
		"snapshot", rep.Snapshot, "took", time.Since(began))
	return ctrl.Result{RequeueAfter: replicaRecheck}, nil
}

// replicaDue says whether sandbox sb (at rest) needs a new copy: it has
// none, its replica node is not live, or the copy is older than the
// sandbox's last change of readiness (its last pause: it may have run
// since the copy). The Ready condition's time has whole seconds, so a
// copy from the same second as the pause is made again.
func replicaDue(sb *warrenv1.Sandbox, live func(node string) bool) bool {
	r := sb.Status.Replica
	if r == nil || r.Snapshot == "" || !live(r.Node) || r.Node == sb.Status.Node {
		return true
	}
	ready := meta.FindStatusCondition(sb.Status.Conditions, warrenv1.SandboxReady)
	if ready == nil {
		return false
	}
	return r.At.Time.Before(ready.LastTransitionTime.Add(time.Second))
}

// nodeInfo is a node as the replicator sees it.
type nodeInfo struct {
	placement.Node
	Endpoint string
}

// liveNode is node name, if it is Ready with a live Lease.
func liveNode(nodes []nodeInfo, name string) (nodeInfo, bool) {
	for _, n := range nodes {
		if n.Name == name && n.Ready && n.LeaseLive && n.Endpoint != "" {
			return n, true
		}
	}
	return nodeInfo{}, false
}

// fleet is every node with its endpoint, from the cache; with use, what
// their sandboxes use too (placement's view, a walk of every Sandbox
// object: only when a copy is to be placed).
func (p *replicator) fleet(ctx context.Context, use bool) ([]nodeInfo, error) {
	var wns warrenv1.WarrenNodeList
	if err := p.client.List(ctx, &wns); err != nil {
		return nil, fmt.Errorf("listing WarrenNodes: %w", err)
	}
	var leases coordinationv1.LeaseList
	if err := p.client.List(ctx, &leases, client.InNamespace(p.ns)); err != nil {
		return nil, fmt.Errorf("listing Leases: %w", err)
	}
	var sbs warrenv1.SandboxList
	if use {
		if err := p.client.List(ctx, &sbs, client.InNamespace(p.ns), client.UnsafeDisableDeepCopy); err != nil {
			return nil, fmt.Errorf("listing Sandboxes: %w", err)
		}
	}
	pl := Fleet(wns.Items, leases.Items, sbs.Items, time.Now())
	out := make([]nodeInfo, len(pl))
	for i := range pl {
		out[i] = nodeInfo{Node: pl[i], Endpoint: strings.TrimRight(wns.Items[i].Status.Endpoint, "/")}
	}
	return out, nil
}

// target is the node to keep sb's copy on: the one holding its copy now
// while it is live (the new copy is then a delta), else placement's choice
// among the live nodes other than its owner that run its runtime.
func (p *replicator) target(ctx context.Context, sb *warrenv1.Sandbox, live []nodeInfo) (nodeInfo, error) {
	if r := sb.Status.Replica; r != nil && r.Node != sb.Status.Node {
		if n, ok := liveNode(live, r.Node); ok {
			return n, nil
		}
	}
	nodes, err := p.fleet(ctx, true)
	if err != nil {
		return nodeInfo{}, err
	}
	var cands []placement.Node
	for _, n := range nodes {
		if n.Name != sb.Status.Node && n.Endpoint != "" {
			cands = append(cands, n.Node)
		}
	}
	req := RequestFromSandbox(sb)
	req.Template, req.Snapshot = "", "" // the copy needs neither
	req.Runtime = sb.Status.Runtime
	p.mu.Lock()
	d, err := p.policy.Choose(cands, req, p.rng)
	p.mu.Unlock()
	if err != nil {
		return nodeInfo{}, err
	}
	i := slices.IndexFunc(nodes, func(n nodeInfo) bool { return n.Name == d.Node })
	return nodes[i], nil
}

// replicate has the owner take a replica snapshot and the target pull it.
func (p *replicator) replicate(ctx context.Context, sb *warrenv1.Sandbox, owner, target nodeInfo) (warrenv1.SandboxReplica, error) {
	key, err := p.fleetKey(ctx)
	if err != nil {
		return warrenv1.SandboxReplica{}, err
	}
	id := url.PathEscape(sb.Status.SandboxID)
	var snap struct {
		ID string `json:"snapshotID"`
	}
	if err := p.post(ctx, key, owner.Endpoint+"/sandboxes/"+id+"/replica", nil, &snap); err != nil {
		return warrenv1.SandboxReplica{}, fmt.Errorf("the owner's replica snapshot: %w", err)
	}
	body, err := json.Marshal(map[string]string{"from": owner.Endpoint, "snapshot": snap.ID, "team": teamOfObject(sb)})
	if err != nil {
		return warrenv1.SandboxReplica{}, err
	}
	if err := p.post(ctx, key, target.Endpoint+"/sandboxes/"+id+"/replica/pull", body, nil); err != nil {
		return warrenv1.SandboxReplica{}, fmt.Errorf("the replica node's pull of snapshot %s: %w", snap.ID, err)
	}
	return warrenv1.SandboxReplica{Node: target.Name, Snapshot: snap.ID, At: metav1.NowMicro()}, nil
}

// teamOfObject is the team of a Sandbox object's sandbox.
func teamOfObject(sb *warrenv1.Sandbox) string {
	if t := sb.Labels[fleet.LabelTeam]; t != "" {
		return t
	}
	return fleet.AdminTeam
}

// record writes the copy into the object's status, unless the sandbox has
// changed node meanwhile.
func (p *replicator) record(ctx context.Context, sb *warrenv1.Sandbox, owner string, rep warrenv1.SandboxReplica) error {
	err := patchStatus(ctx, p.client, p.reader, sb, func() bool {
		if sb.Status.Node != owner {
			return false
		}
		sb.Status.Replica = &rep
		return true
	})
	if err != nil {
		return fmt.Errorf("record the replica of sandbox %s: %w", sb.Status.SandboxID, err)
	}
	return nil
}

// fleetKey reads the fleet's admin key from its Secret, with which the
// nodes' replica routes are called.
func (p *replicator) fleetKey(ctx context.Context) (string, error) {
	var sec corev1.Secret
	if err := p.reader.Get(ctx, client.ObjectKey{Namespace: p.ns, Name: fleet.FleetAdminSecret}, &sec); err != nil {
		return "", fmt.Errorf("the fleet's admin key (Secret %s/%s): %w", p.ns, fleet.FleetAdminSecret, err)
	}
	key := strings.TrimSpace(string(sec.Data[fleet.KeyDataKey]))
	if key == "" {
		return "", fmt.Errorf("the Secret %s/%s holds no %q", p.ns, fleet.FleetAdminSecret, fleet.KeyDataKey)
	}
	return key, nil
}

// post POSTs body to a node's url with the fleet's key and decodes a 2xx
// answer into out (nil: discarded).
func (p *replicator) post(ctx context.Context, key, u string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("X-API-Key", key)
	req.Header.Set("Content-Type", "application/json")
	res, err := p.http.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 512))
		if res.StatusCode == http.StatusConflict {
			return fmt.Errorf("%s: %s: %w", res.Status, strings.TrimSpace(string(b)), errdefs.ErrConflict)
		}
		return fmt.Errorf("%s: %s", res.Status, strings.TrimSpace(string(b)))
	}
	if out == nil {
		return nil
	}
	return json.NewDecoder(res.Body).Decode(out)
}
