package gateway

import (
	"net"
	"net/http"
	"strconv"
	"strings"
)

// routeKind is what the gateway does with a request.
type routeKind int

const (
	routeOther    routeKind = iota // any Ready node answers (openapi, tools, pools, unknown paths)
	routePlane                     // E2B's sandbox plane: to the node of the sandbox, unauthenticated here
	routeSandbox                   // /sandboxes/{id}/..., /v2/sandboxes/{id}/...: to the node of id
	routeCreate                    // POST /sandboxes, /v2/sandboxes: placed, then forwarded
	routeList                      // GET /sandboxes, /v2/sandboxes, /snapshots, /templates: fanned out
	routeSnapshot                  // /snapshots/{id}/...: to the node holding it
	routeImport                    // POST /snapshots/import: placed like a create
	routeTemplate                  // /templates/{id}: to every Ready node
	routeKeys                      // /api-keys[/{id}]: the gateway's own, from Secrets
	routeHealth                    // GET /health: the gateway's own
	routeMetrics                   // GET /metrics: the gateway's own
	routeUnrouted                  // no node can be named: answered here with an error
	routeSigned                    // a signed /files URL naming no sandbox: to the node whose sandbox signed it
	routeNodes                     // /fleet/nodes: the gateway's own, from the WarrenNode cache
	routeTplBuild                  // POST /v3/templates: placed on the template's node (templates.go)
	routeTpl                       // a built template's calls: to its node
	routeTplTags                   // POST, DELETE /templates/tags: to the node of the template the body names
	routeTplCache                  // GET /templates/builds/cache: to the team's build node
)

// listKind is the kind of records a fanned-out list merges.
type listKind int

const (
	listSandboxes listKind = iota
	listSnapshots
	listTemplates
)

// route is where a request goes.
type route struct {
	kind routeKind
	id   string // the sandbox, snapshot, template or key the path or plane names
	list listKind
	// byHost: a sandbox-plane request routed by its Host
	// <port>-<id>.<domain> (port is then the port).
	byHost bool
	port   int
	// alias: a routeTpl id that is a name another team may hold.
	alias bool
}

// classify decides a request's route from its headers, Host and path
// alone. domain, when set, is the only domain whose Host names a sandbox.
func classify(r *http.Request, domain string) route {
	if id := r.Header.Get("E2b-Sandbox-Id"); id != "" {
		return route{kind: routePlane, id: strings.ToLower(id)}
	}
	if id, port, ok := sandboxOfHost(r.Host, domain); ok {
		return route{kind: routePlane, id: id, byHost: true, port: port}
	}
	if r.URL.Path == "/files" && r.URL.Query().Get("signature") != "" {
		return route{kind: routeSigned}
	}
	return classifyPath(r.Method, r.URL.Path)
}

// sandboxOfHost reads a Host of the form <port>-<id>.<domain>, as the node
// does; with a domain, only hosts under it.
func sandboxOfHost(host, domain string) (id string, port int, ok bool) {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	label, rest, found := strings.Cut(host, ".")
	if !found || rest == "" || (domain != "" && !strings.EqualFold(rest, domain)) {
		return "", 0, false
	}
	p, id, found := strings.Cut(label, "-")
	if !found || id == "" || p == "" || strings.Trim(p, "0123456789") != "" {
		return "", 0, false
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return "", 0, false
	}
	return strings.ToLower(id), port, true
}

// classifyPath routes a control-plane request by method and path.
func classifyPath(method, path string) route {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	if segs[0] == "v2" && len(segs) > 1 && segs[1] == "sandboxes" {
		segs = segs[1:]
	}
	head, id := segs[0], ""
	if len(segs) > 1 {
		id = segs[1]
	}
	switch {
	case head == "health" && len(segs) == 1:
		return route{kind: routeHealth}
	case head == "metrics" && len(segs) == 1:
		return route{kind: routeMetrics}
	case head == "api-keys" && len(segs) <= 2:
		return route{kind: routeKeys, id: id}
	case head == "fleet" && id == "nodes" && len(segs) == 2:
		return route{kind: routeNodes}
	case head == "sandboxes":
		return sandboxesRoute(method, id)
	case head == "snapshots":
		return snapshotsRoute(method, id, len(segs))
	}
	if rt, ok := builtRoute(method, segs); ok {
		return rt
	}
	switch {
	case head == "templates" && len(segs) == 1 && method == http.MethodGet:
		return route{kind: routeList, list: listTemplates}
	case head == "templates" && len(segs) == 2:
		return route{kind: routeTemplate, id: id}
	case head == "mcp" || isEnvdPath(path):
		return route{kind: routeUnrouted}
	}
	return route{kind: routeOther}
}

func sandboxesRoute(method, id string) route {
	switch {
	case id != "":
		return route{kind: routeSandbox, id: id}
	case method == http.MethodPost:
		return route{kind: routeCreate}
	case method == http.MethodGet:
		return route{kind: routeList, list: listSandboxes}
	}
	return route{kind: routeOther}
}

func snapshotsRoute(method, id string, segs int) route {
	switch {
	case id == "import" && segs == 2 && method == http.MethodPost:
		return route{kind: routeImport}
	case id != "":
		return route{kind: routeSnapshot, id: id}
	case method == http.MethodGet:
		return route{kind: routeList, list: listSnapshots}
	}
	return route{kind: routeOther}
}

// isEnvdPath reports whether a request without sandbox headers or Host was
// meant for E2B's sandbox plane (as the node's check).
func isEnvdPath(path string) bool {
	return path == "/files" || strings.HasPrefix(path, "/process.Process/") || strings.HasPrefix(path, "/filesystem.Filesystem/")
}

// apiKeyOf is a request's API key: X-API-Key, or a Bearer Authorization.
func apiKeyOf(r *http.Request) string {
	if k := r.Header.Get("X-API-Key"); k != "" {
		return k
	}
	if b, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return b
	}
	return ""
}

// isForkPath reports whether path is a sandbox's fork, which makes a new
// sandbox on the same node.
func isForkPath(path string) bool {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	if segs[0] == "v2" {
		segs = segs[1:]
	}
	return len(segs) == 3 && segs[0] == "sandboxes" && segs[2] == "fork"
}
