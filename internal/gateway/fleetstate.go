package gateway

import (
	"slices"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warrenv1 "github.com/warrenhq/warren/apis/warren/v1alpha1"
	"github.com/warrenhq/warren/internal/kube/fleet"
)

// fleetState is what requests read of the fleet, kept up to date by the
// watch caches' event handlers rather than read from the caches per
// request. Every read of a controller-runtime cache limited to a namespace
// first asks the REST mapper whether the type is namespaced (a walk of
// every API group's mapper, ~10 µs), and a routed request made four such
// reads (its key, its sandbox's object, the node, the node's Lease): a
// third of the gateway's CPU per request. The objects held are the
// caches' own: read them, never write to them.
type fleetState struct {
	mu     sync.RWMutex
	nodes  map[string]*warrenv1.WarrenNode
	names  []string // of nodes, sorted: Nodes' order
	leases map[string]*coordinationv1.Lease
	// sandboxes: sandbox id → Sandbox object → its node; keys: key hash →
	// Secret → its team.
	sandboxes multiIndex
	keys      multiIndex
	// lost: sandbox id → its Lost object, while no node took it back
	// (restored elsewhere or its own node back).
	lost map[string]*warrenv1.Sandbox
}

func newFleetState() *fleetState {
	return &fleetState{
		nodes: map[string]*warrenv1.WarrenNode{}, leases: map[string]*coordinationv1.Lease{},
		sandboxes: newMultiIndex(), keys: newMultiIndex(), lost: map[string]*warrenv1.Sandbox{},
	}
}

// handlers are the event handlers that keep the state, by the type of
// object they watch.
func (s *fleetState) handlers() map[client.Object]toolscache.ResourceEventHandler {
	return map[client.Object]toolscache.ResourceEventHandler{
		&warrenv1.WarrenNode{}:  eventHandler(s.setNode, s.dropNode),
		&coordinationv1.Lease{}: eventHandler(s.setLease, s.dropLease),
		&warrenv1.Sandbox{}:     eventHandler(s.setSandbox, s.dropSandbox),
		&corev1.Secret{}:        eventHandler(s.setKey, s.dropKey),
	}
}

// eventHandler calls set with each added or updated object of type T and
// drop with each deleted one (also when the watch missed the deletion).
func eventHandler[T client.Object](set, drop func(T)) toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) {
			if t, ok := o.(T); ok {
				set(t)
			}
		},
		UpdateFunc: func(_, o any) {
			if t, ok := o.(T); ok {
				set(t)
			}
		},
		DeleteFunc: func(o any) {
			if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
				o = d.Obj
			}
			if t, ok := o.(T); ok {
				drop(t)
			}
		},
	}
}

func (s *fleetState) setNode(wn *warrenv1.WarrenNode) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, known := s.nodes[wn.Name]; !known {
		i, _ := slices.BinarySearch(s.names, wn.Name)
		s.names = slices.Insert(s.names, i, wn.Name)
	}
	s.nodes[wn.Name] = wn
}

func (s *fleetState) dropNode(wn *warrenv1.WarrenNode) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.nodes, wn.Name)
	if i, found := slices.BinarySearch(s.names, wn.Name); found {
		s.names = slices.Delete(s.names, i, i+1)
	}
}

func (s *fleetState) setLease(l *coordinationv1.Lease) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leases[l.Name] = l
}

func (s *fleetState) dropLease(l *coordinationv1.Lease) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.leases, l.Name)
}

func (s *fleetState) setSandbox(sb *warrenv1.Sandbox) {
	node := sb.Status.Node
	if node == "" {
		node = sb.Labels[fleet.LabelNode]
	}
	lost := sb.Status.Phase == warrenv1.SandboxLost
	if lost && sb.Spec.NodeName != "" && sb.Spec.NodeName != sb.Status.Node {
		// Restored on another node, which has not reported it yet.
		node, lost = sb.Spec.NodeName, false
	}
	ids := sandboxIDsOf(sb)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sandboxes.set(sb.Name, ids, node)
	for _, id := range ids {
		if lost {
			s.lost[id] = sb
		} else if s.lost[id] != nil && s.lost[id].Name == sb.Name {
			delete(s.lost, id)
		}
	}
}

func (s *fleetState) dropSandbox(sb *warrenv1.Sandbox) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sandboxes.drop(sb.Name)
	for _, id := range sandboxIDsOf(sb) {
		if s.lost[id] != nil && s.lost[id].Name == sb.Name {
			delete(s.lost, id)
		}
	}
}

// lostSandbox is the Lost object of sandbox id, if it is Lost.
func (s *fleetState) lostSandbox(id string) (*warrenv1.Sandbox, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	sb, ok := s.lost[id]
	return sb, ok
}

// lostSandboxes is the Lost objects of every Lost sandbox.
func (s *fleetState) lostSandboxes() []*warrenv1.Sandbox {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]*warrenv1.Sandbox, 0, len(s.lost))
	for _, sb := range s.lost {
		out = append(out, sb)
	}
	return out
}

func (s *fleetState) setKey(sec *corev1.Secret) {
	var hashes []string
	if h := sec.Data[fleet.KeyDataHash]; len(h) > 0 {
		hashes = []string{string(h)}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys.set(sec.Name, hashes, string(sec.Data[fleet.KeyDataTeam]))
}

func (s *fleetState) dropKey(sec *corev1.Secret) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys.drop(sec.Name)
}

// node is a WarrenNode and its Lease (nil when there is none).
func (s *fleetState) node(name string) (*warrenv1.WarrenNode, *coordinationv1.Lease, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	wn, ok := s.nodes[name]
	return wn, s.leases[fleet.LeaseName(name)], ok
}

// allNodes is every node as of now, in name order.
func (s *fleetState) allNodes(now time.Time) []Node {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]Node, 0, len(s.names))
	for _, name := range s.names {
		out = append(out, nodeOf(s.nodes[name], s.leases[fleet.LeaseName(name)], now))
	}
	return out
}

// sandboxNode is the node a Sandbox object names for sandbox id.
func (s *fleetState) sandboxNode(id string) (string, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.sandboxes.lookup(id)
}

// keyTeam is the team of the key whose hash is hash.
func (s *fleetState) keyTeam(hash string) (string, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.keys.lookup(hash)
}

// multiIndex finds a value (a node, a team) by a key (a sandbox id, a
// key's hash) several objects may name; an object's entries are replaced
// whole when it changes.
type multiIndex struct {
	byKey  map[string]map[string]string // key → object name → its value
	keysOf map[string][]string          // object name → its keys
}

func newMultiIndex() multiIndex {
	return multiIndex{byKey: map[string]map[string]string{}, keysOf: map[string][]string{}}
}

func (x multiIndex) set(obj string, keys []string, value string) {
	x.drop(obj)
	if len(keys) == 0 {
		return
	}
	x.keysOf[obj] = keys
	for _, k := range keys {
		if x.byKey[k] == nil {
			x.byKey[k] = map[string]string{}
		}
		x.byKey[k][obj] = value
	}
}

func (x multiIndex) drop(obj string) {
	for _, k := range x.keysOf[obj] {
		delete(x.byKey[k], obj)
		if len(x.byKey[k]) == 0 {
			delete(x.byKey, k)
		}
	}
	delete(x.keysOf, obj)
}

// lookup is a non-empty value an object names key with.
func (x multiIndex) lookup(key string) (string, bool) {
	for _, v := range x.byKey[key] {
		if v != "" {
			return v, true
		}
	}
	return "", false
}
