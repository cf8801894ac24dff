// Package gateway is `warren gateway`: one stateless HTTP entry point to a
// fleet of warren nodes on Kubernetes. It places creates on a node,
// forwards every call about a sandbox to the node that holds it, fans lists
// out and merges them, and serves API keys from Secrets. It learns the
// fleet from watch caches of WarrenNodes, Leases, Sandbox objects and API
// key Secrets; the node's API is unchanged behind it.
package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	warrenv1 "github.com/warrenhq/warren/apis/warren/v1alpha1"
	wapi "github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/errdefs"
)

// Gateway routes requests to the fleet's nodes.
type Gateway struct {
	cfg     Config
	log     *slog.Logger
	fleet   fleetSource
	keys    *keyStore
	placer  Placer
	memo    memo
	moves   *mover
	http    *http.Client // the gateway's own calls: probes, fan-outs
	proxy   *httputil.ReverseProxy
	direct  *directProxy // the common call's path; nil: every call takes proxy
	metrics *gatewayMetrics

	// restores makes Lost sandboxes again from their replicas (lost.go).
	restores *restorer
}

// fleetSource is what the gateway reads of the fleet (fleetView).
type fleetSource interface {
	Nodes(ctx context.Context) ([]Node, error)
	Node(ctx context.Context, name string) (n Node, ok bool, err error)
	SandboxNode(ctx context.Context, id string) (node string, ok bool, err error)
	LostSandbox(id string) (*warrenv1.Sandbox, bool)
	LostSandboxes() []*warrenv1.Sandbox
}

// newGateway wires a gateway to its fleet view, keys and placer.
func newGateway(cfg Config, log *slog.Logger, fleet fleetSource, keys *keyStore, placer Placer) *Gateway {
	transport := newTransport()
	g := &Gateway{
		cfg: cfg, log: log, fleet: fleet, keys: keys, placer: placer,
		http:    &http.Client{Transport: transport, Timeout: time.Minute},
		metrics: newGatewayMetrics(),
	}
	bufs := &copyBuffers{}
	g.proxy = newProxy(transport, g.proxyError, bufs)
	g.direct = newDirectProxy(bufs)
	g.moves = &mover{fleet: fleet, keys: keys, http: g.http, memo: &g.memo, log: log, locate: g.locateSandbox}
	g.restores = &restorer{owner: g.owner, keys: keys, moves: g.moves, http: g.http, memo: &g.memo}
	return g
}

func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rt := classify(r, g.cfg.Domain)
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	defer func() {
		g.metrics.requests.WithLabelValues(routeNames[rt.kind], strconv.Itoa(sw.status)).Inc()
	}()
	switch rt.kind {
	case routePlane:
		// The node checks the sandbox's tokens (or the key) itself.
		g.serveSandbox(sw, r, rt)
		return
	case routeHealth:
		g.serveHealth(sw, r)
		return
	case routeMetrics:
		g.serveMetrics(sw, r)
		return
	case routeSigned:
		g.serveSigned(sw, r)
		return
	case routeUnrouted:
		writeError(sw, fmt.Errorf("%s %s names no sandbox the gateway can route to: the sandbox plane needs the E2b-Sandbox-Id header or a Host of <port>-<id>.<domain>, and /mcp is served by each node, not the gateway: %w", r.Method, r.URL.Path, errdefs.ErrInvalid))
		return
	}
	k, err := g.keys.authenticate(apiKeyOf(r))
	if err != nil {
		writeError(sw, err)
		return
	}
	g.serveControl(sw, r, rt, k)
}

// serveControl serves an authenticated control-plane request.
func (g *Gateway) serveControl(w http.ResponseWriter, r *http.Request, rt route, k key) {
	switch rt.kind {
	case routeSandbox:
		if isMovePath(r, rt.id) {
			g.serveMove(w, r, rt.id, k)
			return
		}
		if lost, ok := g.fleet.LostSandbox(rt.id); ok && g.serveLost(w, r, rt, k, lost) {
			return
		}
		g.serveSandbox(w, r, rt)
	case routeCreate:
		g.serveCreate(w, r, rt, k)
	case routeImport:
		g.servePlaced(w, r, rt, PlaceRequest{})
	case routeList:
		g.serveList(w, r, rt.list, k.team)
	case routeSnapshot:
		g.serveSnapshot(w, r, rt)
	case routeTemplate:
		templateRouter{g}.serveTemplateOrBuilt(w, r, rt)
	case routeKeys:
		g.serveKeys(w, r, rt, k)
	case routeNodes:
		g.serveFleetNodes(w, r)
	case routeTplBuild, routeTpl, routeTplTags, routeTplCache:
		templateRouter{g}.serveBuiltControl(w, r, rt, k)
	default:
		g.serveAny(w, r, rt)
	}
}

// serveSandbox forwards a request about one sandbox to its node.
func (g *Gateway) serveSandbox(w http.ResponseWriter, r *http.Request, rt route) {
	fork := rt.kind == routeSandbox && r.Method == http.MethodPost && isForkPath(r.URL.Path)
	if fork {
		// As a node: a bad count is the caller's mistake whether or not
		// the sandbox exists (E2B's SDK maps the 400 to its argument error).
		if err := checkForkCount(r); err != nil {
			writeError(w, err)
			return
		}
	}
	node, err := g.locateSandbox(r.Context(), r, rt.id, rt.kind == routePlane)
	if err != nil {
		if rt.kind == routePlane {
			writePlaneError(w, r, rt.id, err)
			return
		}
		writeError(w, err)
		return
	}
	var created func(string)
	if fork {
		created = func(id string) { g.memo.put(sandboxKey(id), node.Name) }
	}
	g.forward(w, r, node, rt, created)
}

// checkForkCount refuses a fork whose count is below 1, as the node does;
// the body is put back for the node.
func checkForkCount(r *http.Request) error {
	body, err := bufferBody(r, "fork")
	if err != nil {
		return err
	}
	var in struct {
		Count *int `json:"count"`
	}
	if json.Unmarshal(body, &in) == nil && in.Count != nil && *in.Count < 1 {
		return fmt.Errorf("count %d: want at least 1 fork (omit count for one): %w", *in.Count, errdefs.ErrInvalid)
	}
	return nil
}

// bufferBody reads r's body (at most maxCreateBody) and puts it back, so
// that the gateway can read what it routes by and still forward it whole.
func bufferBody(r *http.Request, what string) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxCreateBody+1))
	if err != nil {
		return nil, fmt.Errorf("read the %s's body: %v: %w", what, err, errdefs.ErrInvalid)
	}
	if len(body) > maxCreateBody {
		return nil, fmt.Errorf("the %s's body is over %d bytes: %w", what, maxCreateBody, errdefs.ErrInvalid)
	}
	holdBody(r, body)
	return body, nil
}

// serveSnapshot forwards a request about one snapshot to its node.
func (g *Gateway) serveSnapshot(w http.ResponseWriter, r *http.Request, rt route) {
	node, err := g.locateSnapshot(r.Context(), r, rt.id)
	if err != nil {
		writeError(w, err)
		return
	}
	g.forward(w, r, node, rt, nil)
}

// serveAny forwards a request any node answers alike (the OpenAPI
// document, tools, unknown paths) to the first Ready node.
func (g *Gateway) serveAny(w http.ResponseWriter, r *http.Request, rt route) {
	ready, err := g.readyOrUnavailable(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	g.forward(w, r, ready[0], rt, nil)
}

// maxCreateBody bounds the create body the gateway reads to place it (the
// node's own bound on JSON bodies).
const maxCreateBody = 1 << 20

// serveCreate places a create and forwards it, body and all; the answer
// teaches the memo the new sandbox's node.
func (g *Gateway) serveCreate(w http.ResponseWriter, r *http.Request, rt route, k key) {
	body, err := bufferBody(r, "create")
	if err != nil {
		writeError(w, err)
		return
	}
	req := placeRequestOf(body)
	req.Team = k.team
	if ik := r.Header.Get("Idempotency-Key"); ik != "" {
		req.IdempotencyKey = k.team + "/" + ik
	}
	g.servePlaced(w, r, rt, req)
}

// servePlaced forwards a request that makes something to the node
// placement chooses.
func (g *Gateway) servePlaced(w http.ResponseWriter, r *http.Request, rt route, req PlaceRequest) {
	nodes, err := g.fleet.Nodes(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	var holder *Node
	if req.Template != "" && !anyHasTemplate(nodes, req.Template) {
		// Not a template any node lists: a create from a snapshot (E2B
		// names snapshots as templates), which placement keeps near it.
		req.FromSnapshot = req.Template
		if h, err := g.locateSnapshot(r.Context(), r, req.FromSnapshot); err == nil {
			holder = &h
			nodes = slices.Clone(nodes)
			for i := range nodes {
				nodes[i].HoldsSnapshot = nodes[i].Name == h.Name
			}
		} else if b, ok := (templateRouter{g}).builtHolder(r.Context(), r, req.Template); ok {
			// A template built from steps: its sandboxes start on the
			// node that built it, which no WarrenNode lists it for
			// (templates.go).
			req.Template, req.FromSnapshot, nodes = "", "", []Node{b}
		}
	}
	node, err := g.placer.Place(r.Context(), req, nodes)
	if err != nil {
		writeError(w, err)
		return
	}
	if holder != nil && node.Name != holder.Name {
		if err := g.copySnapshot(r.Context(), req.Team, req.FromSnapshot, *holder, node); err != nil {
			writeError(w, err)
			return
		}
	}
	g.forward(w, r, node, rt, func(id string) { g.memo.put(sandboxKey(id), node.Name) })
}

// placeRequestOf reads what placement weighs from a create's body; a body
// that does not parse places as a default create (the node refuses it).
func placeRequestOf(body []byte) PlaceRequest {
	var in wapi.NewSandbox
	if len(body) == 0 || json.Unmarshal(body, &in) != nil {
		return PlaceRequest{}
	}
	req := PlaceRequest{Template: in.TemplateID, Runtime: in.Runtime, Devices: in.Devices}
	if l := in.Limits; l != nil {
		req.MemoryBytes = l.MemoryMB << 20
		req.MilliCPU = int64(l.CPUCount * 1000)
		req.DiskBytes = l.DiskMB << 20
	}
	return req
}

func anyHasTemplate(nodes []Node, t string) bool {
	for _, n := range nodes {
		if n.HasTemplate(t) {
			return true
		}
	}
	return false
}

// serveHealth answers the gateway's own health: its nodes, Ready of all.
// It is 200 whenever the gateway serves, as the node's is, even with no
// node Ready: a readiness probe on it must not take every replica out of
// the Service while the nodes come up (requests then get 503 from the
// gateway, which says why, rather than a refused connection).
func (g *Gateway) serveHealth(w http.ResponseWriter, r *http.Request) {
	nodes, err := g.fleet.Nodes(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	h := Health{Status: "ok", GatewayID: g.cfg.GatewayID, NodesTotal: len(nodes), NodesReady: len(readyNodes(nodes))}
	if h.NodesReady == 0 {
		h.Status = "unavailable"
	}
	writeJSON(w, http.StatusOK, h)
}

// Health is the answer of the gateway's GET /health.
type Health struct {
	Status     string `json:"status"` // ok, or unavailable when no node is Ready
	GatewayID  string `json:"gatewayId"`
	NodesReady int    `json:"nodesReady"`
	NodesTotal int    `json:"nodesTotal"`
}

// serveMetrics serves the gateway's own Prometheus series. They hold no
// sandbox's data, so no key is needed.
func (g *Gateway) serveMetrics(w http.ResponseWriter, r *http.Request) {
	if nodes, err := g.fleet.Nodes(r.Context()); err == nil {
		g.metrics.nodes.WithLabelValues("total").Set(float64(len(nodes)))
		g.metrics.nodes.WithLabelValues("ready").Set(float64(len(readyNodes(nodes))))
	}
	promhttp.HandlerFor(g.metrics.reg, promhttp.HandlerOpts{}).ServeHTTP(w, r)
}

// statusWriter records the status a request was answered with. It passes
// Flush and Unwrap through so streams stay unbuffered and upgrades work.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
