package gateway

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warrenv1 "github.com/warrenhq/warren/apis/warren/v1alpha1"
	"github.com/warrenhq/warren/internal/kube/fleet"
)

// Field indexes of the watch cache.
const (
	indexSandboxID = "warren.sandboxID" // Sandbox objects by sandbox id
	indexKeyHash   = "warren.keyHash"   // API key Secrets by the key's hash
)

// fleetView answers the gateway's questions from watch caches of the
// WarrenNodes, Leases, Sandbox objects and API key Secrets: no request
// reads the API server. Its reads share the cache's objects
// (UnsafeDisableDeepCopy) to keep copies off every request's path: nothing
// here writes to what it reads.
type fleetView struct {
	cache     cache.Cache
	namespace string
	now       func() time.Time
}

// newFleetView builds the caches and their indexes; start runs them.
func newFleetView(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, namespace string) (*fleetView, error) {
	c, err := cache.New(cfg, cache.Options{
		Scheme:            scheme,
		DefaultNamespaces: map[string]cache.Config{namespace: {}},
		ByObject: map[client.Object]cache.ByObject{
			// Only API key Secrets: the gateway has no business with others.
			&corev1.Secret{}: {Label: labels.SelectorFromSet(labels.Set{fleet.LabelAPIKey: "true"})},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("watch cache: %w", err)
	}
	if err := c.IndexField(ctx, &warrenv1.Sandbox{}, indexSandboxID, sandboxIDsOf); err != nil {
		return nil, fmt.Errorf("index Sandbox objects: %w", err)
	}
	if err := c.IndexField(ctx, &corev1.Secret{}, indexKeyHash, func(o client.Object) []string {
		if h := o.(*corev1.Secret).Data[fleet.KeyDataHash]; len(h) > 0 {
			return []string{string(h)}
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("index API key Secrets: %w", err)
	}
	// Informers start with the cache rather than at the first request.
	for _, o := range []client.Object{&warrenv1.WarrenNode{}, &coordinationv1.Lease{}, &warrenv1.Sandbox{}, &corev1.Secret{}} {
		if _, err := c.GetInformer(ctx, o); err != nil {
			return nil, fmt.Errorf("watch %T: %w", o, err)
		}
	}
	return &fleetView{cache: c, namespace: namespace, now: time.Now}, nil
}

// sandboxIDsOf is the sandbox id a Sandbox object stands for: its status
// (set by the node) and its label (set with the object by the node).
func sandboxIDsOf(o client.Object) []string {
	sb := o.(*warrenv1.Sandbox)
	var out []string
	if id := sb.Status.SandboxID; id != "" {
		out = append(out, id)
	}
	if id := sb.Labels[fleet.LabelSandboxID]; id != "" && !slices.Contains(out, id) {
		out = append(out, id)
	}
	return out
}

// start runs the caches until ctx ends and waits for their first sync.
func (v *fleetView) start(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- v.cache.Start(ctx) }()
	if !v.cache.WaitForCacheSync(ctx) {
		select {
		case err := <-errc:
			return fmt.Errorf("watch cache: %w", err)
		default:
			return fmt.Errorf("watch cache did not sync: %w", ctx.Err())
		}
	}
	return nil
}

// Nodes lists every WarrenNode with its readiness, in name order.
func (v *fleetView) Nodes(ctx context.Context) ([]Node, error) {
	var wns warrenv1.WarrenNodeList
	if err := v.cache.List(ctx, &wns, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list WarrenNodes: %w", err)
	}
	var leases coordinationv1.LeaseList
	if err := v.cache.List(ctx, &leases, client.InNamespace(v.namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list Leases: %w", err)
	}
	byName := make(map[string]*coordinationv1.Lease, len(leases.Items))
	for i := range leases.Items {
		byName[leases.Items[i].Name] = &leases.Items[i]
	}
	now := v.now()
	out := make([]Node, 0, len(wns.Items))
	for i := range wns.Items {
		wn := &wns.Items[i]
		out = append(out, nodeOf(wn, byName[fleet.LeaseName(wn.Name)], now))
	}
	slices.SortFunc(out, func(a, b Node) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// SandboxNode is the node a Sandbox object places sandbox id on; ok is
// false when no object names it (yet).
func (v *fleetView) SandboxNode(ctx context.Context, id string) (string, bool, error) {
	var sbs warrenv1.SandboxList
	if err := v.cache.List(ctx, &sbs, client.InNamespace(v.namespace), client.MatchingFields{indexSandboxID: id}, client.UnsafeDisableDeepCopy); err != nil {
		return "", false, fmt.Errorf("look up the Sandbox object of %s: %w", id, err)
	}
	for _, sb := range sbs.Items {
		node := sb.Status.Node
		if node == "" {
			node = sb.Labels[fleet.LabelNode]
		}
		if node != "" {
			return node, true, nil
		}
	}
	return "", false, nil
}
