package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"

	"github.com/warrenhq/warren/internal/errdefs"
)

// memo remembers which node holds a sandbox or snapshot the gateway has
// learnt of (creates it proxied, probes). Ids are never reused, so an entry
// goes stale only when its record is deleted, and then its node answers
// 404 as any would.
type memo struct {
	mu sync.Mutex
	m  map[string]string
}

// maxMemo bounds the memo; past it, it starts over (the cache and probes
// find what it forgot).
const maxMemo = 1 << 16

func (m *memo) get(key string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.m[key]
	return n, ok
}

func (m *memo) put(key, node string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil || len(m.m) >= maxMemo {
		m.m = make(map[string]string)
	}
	m.m[key] = node
}

// Memo keys: sandboxes and snapshots have separate id spaces.
func sandboxKey(id string) string  { return "sb/" + id }
func snapshotKey(id string) string { return "snap/" + id }

// locateSandbox finds the node of sandbox id: the memo, else the cache of
// Sandbox objects, else the Ready node that answers GET /sandboxes/{id}.
func (g *Gateway) locateSandbox(ctx context.Context, r *http.Request, id string) (Node, error) {
	nodes, err := g.fleet.Nodes(ctx)
	if err != nil {
		return Node{}, err
	}
	if name, ok := g.memo.get(sandboxKey(id)); ok {
		g.metrics.located.WithLabelValues("memo").Inc()
		return owner(nodes, name, "sandbox "+id)
	}
	name, ok, err := g.fleet.SandboxNode(ctx, id)
	if err != nil {
		return Node{}, err
	}
	if ok {
		g.metrics.located.WithLabelValues("cache").Inc()
		return owner(nodes, name, "sandbox "+id)
	}
	n, err := g.probe(ctx, r, nodes, "/sandboxes/"+url.PathEscape(id), "sandbox "+id)
	if err == nil {
		g.memo.put(sandboxKey(id), n.Name)
	}
	return n, err
}

// locateSnapshot finds the node holding snapshot id: the memo, else the
// Ready node that answers GET /snapshots/{id}.
func (g *Gateway) locateSnapshot(ctx context.Context, r *http.Request, id string) (Node, error) {
	nodes, err := g.fleet.Nodes(ctx)
	if err != nil {
		return Node{}, err
	}
	if name, ok := g.memo.get(snapshotKey(id)); ok {
		g.metrics.located.WithLabelValues("memo").Inc()
		return owner(nodes, name, "snapshot "+id)
	}
	n, err := g.probe(ctx, r, nodes, "/snapshots/"+url.PathEscape(id), "snapshot "+id)
	if err == nil {
		g.memo.put(snapshotKey(id), n.Name)
	}
	return n, err
}

// owner is node name among nodes, if it is Ready.
func owner(nodes []Node, name, what string) (Node, error) {
	for _, n := range nodes {
		if n.Name != name {
			continue
		}
		if !n.Ready {
			return Node{}, fmt.Errorf("%s is on node %s, which is not Ready (its Lease expired or it reports not Ready): %w", what, name, errdefs.ErrUnavailable)
		}
		return n, nil
	}
	return Node{}, fmt.Errorf("%s is on node %s, which the fleet does not know (no WarrenNode): %w", what, name, errdefs.ErrUnavailable)
}

// probe asks every Ready node for path at once and takes the one that
// answers 200. It asks with the caller's API key, or, for the sandbox
// plane (tokens, no key), with the fleet's own.
func (g *Gateway) probe(ctx context.Context, r *http.Request, nodes []Node, path, what string) (Node, error) {
	ready := readyNodes(nodes)
	if len(ready) == 0 {
		return Node{}, fmt.Errorf("%s: no warren node is Ready (%d known): %w", what, len(nodes), errNoNode)
	}
	hdr := probeHeaders(r, g.keys.fleetKey(ctx))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	found := make(chan int, len(ready))
	var wg sync.WaitGroup
	unreachable := 0
	var mu sync.Mutex
	for i, n := range ready {
		wg.Go(func() {
			status, err := g.ask(ctx, n, http.MethodGet, path, hdr)
			switch {
			case err != nil:
				mu.Lock()
				unreachable++
				mu.Unlock()
			case status == http.StatusOK:
				found <- i
			}
		})
	}
	go func() { wg.Wait(); close(found) }()
	if i, ok := <-found; ok {
		g.metrics.located.WithLabelValues("probe").Inc()
		return ready[i], nil
	}
	g.metrics.located.WithLabelValues("miss").Inc()
	if unreachable == len(ready) {
		return Node{}, fmt.Errorf("%s: no Ready node answered: %w", what, errdefs.ErrUnavailable)
	}
	return Node{}, fmt.Errorf("%s: %w", what, errdefs.ErrNotFound)
}

// probeHeaders are the credentials of a probe.
func probeHeaders(r *http.Request, fleetKey string) http.Header {
	h := http.Header{}
	for _, k := range []string{"X-API-Key", "Authorization"} {
		if v := r.Header.Get(k); v != "" {
			h.Set(k, v)
		}
	}
	if len(h) == 0 && fleetKey != "" {
		h.Set("X-API-Key", fleetKey)
	}
	return h
}

// ask sends one bodiless request to a node and returns its status.
func (g *Gateway) ask(ctx context.Context, n Node, method, path string, hdr http.Header) (int, error) {
	req, err := http.NewRequestWithContext(ctx, method, n.Endpoint+path, nil)
	if err != nil {
		return 0, err
	}
	req.Header = hdr.Clone()
	res, err := g.http.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 1<<20))
	_ = res.Body.Close()
	return res.StatusCode, nil
}
