package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/warrenhq/warren/internal/errdefs"
)

// memo remembers which node holds a sandbox or snapshot the gateway has
// learnt of (creates it proxied, probes). An entry goes stale when its
// record is deleted (its node then answers 404 as any would) or when the
// sandbox moves to another node through another gateway: a node's "not
// here" answer drops the entry (forget), so the next call locates it
// afresh.
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

// forget drops key's entry if it still names node.
func (m *memo) forget(key, node string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m[key] == node {
		delete(m.m, key)
	}
}

// Memo keys: sandboxes and snapshots have separate id spaces.
func sandboxKey(id string) string  { return "sb/" + id }
func snapshotKey(id string) string { return "snap/" + id }

// locateSandbox finds the node of sandbox id: the memo, else the cache of
// Sandbox objects, else the Ready node that says it holds it: GET
// /sandboxes/{id} with the caller's key, or, for the sandbox plane (tokens,
// maybe no key), a credential-less plane request.
func (g *Gateway) locateSandbox(ctx context.Context, r *http.Request, id string, plane bool) (Node, error) {
	if name, ok := g.memo.get(sandboxKey(id)); ok {
		g.metrics.located.WithLabelValues("memo").Inc()
		n, err := g.owner(ctx, name, "sandbox "+id)
		if !errdefs.IsUnavailable(err) {
			return n, err
		}
		// Its node is not Ready: the sandbox may have been restored or
		// moved elsewhere through another gateway; the objects know.
		g.memo.forget(sandboxKey(id), name)
	}
	name, ok, err := g.fleet.SandboxNode(ctx, id)
	if err != nil {
		return Node{}, err
	}
	if ok {
		g.metrics.located.WithLabelValues("cache").Inc()
		return g.owner(ctx, name, "sandbox "+id)
	}
	nodes, err := g.fleet.Nodes(ctx)
	if err != nil {
		return Node{}, err
	}
	q := recordProbe(r, "/sandboxes/"+url.PathEscape(id))
	if plane {
		q = planeProbe(id)
	}
	n, err := g.probe(ctx, nodes, q, "sandbox "+id)
	if err == nil {
		g.memo.put(sandboxKey(id), n.Name)
	}
	return n, err
}

// locateSnapshot finds the node holding snapshot id: the memo, else the
// Ready node that answers GET /snapshots/{id}.
func (g *Gateway) locateSnapshot(ctx context.Context, r *http.Request, id string) (Node, error) {
	if name, ok := g.memo.get(snapshotKey(id)); ok {
		g.metrics.located.WithLabelValues("memo").Inc()
		return g.owner(ctx, name, "snapshot "+id)
	}
	nodes, err := g.fleet.Nodes(ctx)
	if err != nil {
		return Node{}, err
	}
	n, err := g.probe(ctx, nodes, recordProbe(r, "/snapshots/"+url.PathEscape(id)), "snapshot "+id)
	if err == nil {
		g.memo.put(snapshotKey(id), n.Name)
	}
	return n, err
}

// owner is node name, if it is Ready. One node is read, not the fleet: it
// is on the path of every call about a sandbox.
func (g *Gateway) owner(ctx context.Context, name, what string) (Node, error) {
	n, ok, err := g.fleet.Node(ctx, name)
	switch {
	case err != nil:
		return Node{}, err
	case !ok:
		return Node{}, fmt.Errorf("%s is on node %s, which the fleet does not know (no WarrenNode): %w", what, name, errdefs.ErrUnavailable)
	case !n.Ready:
		return Node{}, fmt.Errorf("%s is on node %s, which is not Ready (its Lease expired or it reports not Ready): %w", what, name, errdefs.ErrUnavailable)
	}
	return n, nil
}

// probe asks every Ready node at once whether it holds a record and takes
// the one that says so.
func (g *Gateway) probe(ctx context.Context, nodes []Node, q probeQuery, what string) (Node, error) {
	ready := readyNodes(nodes)
	if len(ready) == 0 {
		return Node{}, fmt.Errorf("%s: no warren node is Ready (%d known): %w", what, len(nodes), errNoNode)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	found := make(chan int, len(ready))
	var unreachable atomic.Int32
	var wg sync.WaitGroup
	for i, n := range ready {
		wg.Go(func() {
			status, err := g.ask(ctx, n, http.MethodGet, q.path, q.header)
			switch {
			case err != nil:
				unreachable.Add(1)
			case q.held(status):
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
	if int(unreachable.Load()) == len(ready) {
		return Node{}, fmt.Errorf("%s: no Ready node answered: %w", what, errdefs.ErrUnavailable)
	}
	return Node{}, fmt.Errorf("%s: %w", what, errdefs.ErrNotFound)
}

// probeQuery is how a probe asks a node whether it holds a record.
type probeQuery struct {
	path   string
	header http.Header
	held   func(status int) bool
}

// recordProbe asks for a record with the caller's API key: the node
// answers 200 when it holds one of the key's team.
func recordProbe(r *http.Request, path string) probeQuery {
	return probeQuery{path: path, header: probeHeaders(r), held: func(s int) bool { return s == http.StatusOK }}
}

// planeProbe asks about a sandbox the way the sandbox plane does, with no
// credentials, so it finds a sandbox of any team: the node looks the
// sandbox up before it checks the caller, and answers E2B's 502 "Sandbox
// not found" when it has none, else 401 (no token).
func planeProbe(id string) probeQuery {
	h := http.Header{}
	h.Set("E2b-Sandbox-Id", id)
	h.Set("E2b-Sandbox-Port", strconv.Itoa(envdPort))
	return probeQuery{path: "/health", header: h, held: func(s int) bool { return s == http.StatusUnauthorized || s/100 == 2 }}
}

// envdPort is E2B's envd port on the sandbox plane.
const envdPort = 49983

// probeHeaders are the caller's API key, for a probe.
func probeHeaders(r *http.Request) http.Header {
	h := http.Header{}
	for _, k := range []string{"X-API-Key", "Authorization"} {
		if v := r.Header.Get(k); v != "" {
			h.Set(k, v)
		}
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
