package gateway

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warrenv1 "github.com/warrenhq/warren/apis/warren/v1alpha1"
	"github.com/warrenhq/warren/internal/kube/fleet"
)

// fleetView answers the gateway's questions from watch caches of the
// WarrenNodes, Leases, Sandbox objects and API key Secrets: no request
// reads the API server. Requests read the fleetState the caches' event
// handlers keep (see there why not the caches themselves).
type fleetView struct {
	cache     cache.Cache
	state     *fleetState
	synced    []toolscache.InformerSynced // the handlers' first pass over each cache
	namespace string
	now       func() time.Time
}

// newFleetView builds the caches and their event handlers; start runs them.
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
	v := &fleetView{cache: c, state: newFleetState(), namespace: namespace, now: time.Now}
	// Informers start with the cache rather than at the first request.
	for o, h := range v.state.handlers() {
		inf, err := c.GetInformer(ctx, o)
		if err != nil {
			return nil, fmt.Errorf("watch %T: %w", o, err)
		}
		reg, err := inf.AddEventHandler(h)
		if err != nil {
			return nil, fmt.Errorf("follow %T: %w", o, err)
		}
		v.synced = append(v.synced, reg.HasSynced)
	}
	return v, nil
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
	if !toolscache.WaitForCacheSync(ctx.Done(), v.synced...) {
		return fmt.Errorf("the gateway's view of the fleet did not sync: %w", ctx.Err())
	}
	return nil
}

// Nodes lists every WarrenNode with its readiness, in name order.
func (v *fleetView) Nodes(context.Context) ([]Node, error) {
	return v.state.allNodes(v.now()), nil
}

// Node is one node by name; ok is false when there is no such WarrenNode.
func (v *fleetView) Node(_ context.Context, name string) (Node, bool, error) {
	wn, l, ok := v.state.node(name)
	if !ok {
		return Node{}, false, nil
	}
	return nodeOf(wn, l, v.now()), true, nil
}

// SandboxNode is the node a Sandbox object places sandbox id on; ok is
// false when no object names it (yet).
func (v *fleetView) SandboxNode(_ context.Context, id string) (string, bool, error) {
	node, ok := v.state.sandboxNode(id)
	return node, ok, nil
}

// LostSandbox is the Sandbox object of sandbox id while it is Lost and not
// restored; the object is the cache's: read it, never write to it.
func (v *fleetView) LostSandbox(id string) (*warrenv1.Sandbox, bool) { return v.state.lostSandbox(id) }

// LostSandboxes is every Lost sandbox's object, as LostSandbox's.
func (v *fleetView) LostSandboxes() []*warrenv1.Sandbox { return v.state.lostSandboxes() }

// KeyTeam is the team of the API key whose hash is hash; ok is false when
// no key Secret has that hash (and a team).
func (v *fleetView) KeyTeam(hash string) (string, bool) { return v.state.keyTeam(hash) }
