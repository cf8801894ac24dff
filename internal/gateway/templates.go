package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net/http"
	"net/url"
	"strings"

	"github.com/warrenhq/warren/internal/errdefs"
)

// Templates built from steps (E2B's Template SDK, internal/tplbuild) live
// on the node that built them: its database holds the template, its
// builds and tags, its pool the build snapshots and step cache. The
// gateway keeps no record of them. It places a template's first build
// request on a node, finds that node again by asking the Ready nodes
// (GET /templates/{ref} with the caller's key: 200 on the holder only)
// and remembers the answer in its memo, so every later call about the
// template — uploads, the build, its status, tags, creates of it — goes
// there. Any gateway replica finds the same node the same way.

// templateRouter serves the template build API's routes for the
// gateway (a type of its own: the Gateway's methods are many already).
type templateRouter struct{ *Gateway }

// builtKey is the memo key of a built template, by name or id (a tag is
// cut: every tag of a template is on its node).
func builtKey(ref string) string {
	if i := strings.LastIndexByte(ref, ':'); i >= 0 {
		ref = ref[:i]
	}
	return "tpl/" + ref
}

// builtRoute classifies the template build API's paths: ok is false for
// any other path.
func builtRoute(method string, segs []string) (route, bool) {
	n := len(segs)
	switch {
	case n == 2 && segs[0] == "v3" && segs[1] == "templates" && method == http.MethodPost:
		return route{kind: routeTplBuild}, true
	case n == 5 && segs[0] == "v2" && segs[1] == "templates" && segs[3] == "builds":
		return route{kind: routeTpl, id: segs[2]}, true
	case segs[0] != "templates":
		return route{}, false
	case n == 2 && segs[1] == "tags":
		return route{kind: routeTplTags}, true
	case n == 3 && segs[1] == "aliases":
		return route{kind: routeTpl, id: segs[2], alias: true}, true
	case n == 3 && segs[1] == "builds" && segs[2] == "cache":
		return route{kind: routeTplCache}, true
	case n == 3 && segs[2] == "tags", n == 4 && segs[2] == "files", n == 5 && segs[2] == "builds" && segs[4] == "status":
		return route{kind: routeTpl, id: segs[1]}, true
	}
	return route{}, false
}

// serveBuiltControl serves the template build API's routes.
func (g templateRouter) serveBuiltControl(w http.ResponseWriter, r *http.Request, rt route, k key) {
	switch rt.kind {
	case routeTplBuild:
		g.serveBuildRequest(w, r, rt, k)
	case routeTplTags:
		g.serveBuiltTags(w, r, rt)
	case routeTplCache:
		g.serveBuildCache(w, r, rt, k)
	default:
		g.serveBuilt(w, r, rt)
	}
}

// serveBuilt forwards a call about one built template to its node.
func (g templateRouter) serveBuilt(w http.ResponseWriter, r *http.Request, rt route) {
	node, err := g.locateBuilt(r.Context(), r, rt.id, rt.alias)
	if err != nil {
		writeError(w, err)
		return
	}
	g.forward(w, r, node, rt, nil)
}

// serveBuiltTags forwards POST and DELETE /templates/tags to the node of
// the template their body names (target "name:tag", or name).
func (g templateRouter) serveBuiltTags(w http.ResponseWriter, r *http.Request, rt route) {
	body, err := bufferBody(r, "tags request")
	if err != nil {
		writeError(w, err)
		return
	}
	var in struct{ Target, Name string }
	_ = json.Unmarshal(body, &in) // a bad body is the node's to refuse
	ref := in.Target
	if ref == "" {
		ref = in.Name
	}
	if ref == "" {
		writeError(w, fmt.Errorf("%s /templates/tags names no template (target or name): %w", r.Method, errdefs.ErrInvalid))
		return
	}
	rt.id = ref
	g.serveBuilt(w, r, rt)
}

// serveBuildRequest places POST /v3/templates: on the node that holds the
// template already (the caller's, or another team's, which refuses it),
// else on the node the team's templates go to (buildNode).
func (g templateRouter) serveBuildRequest(w http.ResponseWriter, r *http.Request, rt route, k key) {
	body, err := bufferBody(r, "build request")
	if err != nil {
		writeError(w, err)
		return
	}
	var in struct{ Name, Alias string }
	_ = json.Unmarshal(body, &in)
	name := in.Name
	if name == "" {
		name = in.Alias
	}
	if name != "" {
		if node, err := g.locateBuilt(r.Context(), r, name, true); err == nil {
			g.forward(w, r, node, rt, nil)
			return
		} else if !errdefs.IsNotFound(err) {
			writeError(w, err)
			return
		}
	}
	ready, err := g.readyOrUnavailable(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	g.forward(w, r, buildNode(ready, k.team), rt, nil)
}

// baseTemplate is the server template the SDK's builds start from unless
// they name another (its default image stands for it).
const baseTemplate = "base"

// buildNode is the node a team's new templates are built on: among the
// Ready nodes holding base (all Ready nodes when none does), the one the
// team's name hashes highest with (rendezvous hashing). Every replica
// picks the same node, and a team's templates share it while the fleet
// does, so one built from another finds its parent there.
func buildNode(ready []Node, team string) Node {
	cands := make([]Node, 0, len(ready))
	for _, n := range ready {
		if n.HasTemplate(baseTemplate) {
			cands = append(cands, n)
		}
	}
	if len(cands) == 0 {
		cands = ready
	}
	best, bestScore := cands[0], uint64(0)
	for _, n := range cands {
		h := fnv.New64a()
		h.Write([]byte(team + "\x00" + n.Name))
		if s := h.Sum64(); s > bestScore {
			best, bestScore = n, s
		}
	}
	return best
}

// locateBuilt finds the node of the caller's built template ref (id,
// name or name:tag): the memo, else the Ready node that answers GET
// /templates/{ref} with 200. With alias, a node that answers GET
// /templates/aliases/{name} with 403 (another team's template) holds it
// too: the call goes there to be refused as a single node refuses it.
func (g templateRouter) locateBuilt(ctx context.Context, r *http.Request, ref string, alias bool) (Node, error) {
	key := builtKey(ref)
	if name, ok := g.memo.get(key); ok {
		g.metrics.located.WithLabelValues("memo").Inc()
		n, err := g.owner(ctx, name, "template "+ref)
		if !errdefs.IsUnavailable(err) {
			return n, err
		}
		g.memo.forget(key, name)
	}
	nodes, err := g.fleet.Nodes(ctx)
	if err != nil {
		return Node{}, err
	}
	n, err := g.probe(ctx, nodes, recordProbe(r, "/templates/"+url.PathEscape(ref)), "template "+ref)
	if err == nil {
		g.memo.put(key, n.Name)
		return n, nil
	}
	if !alias || !errdefs.IsNotFound(err) {
		return Node{}, err
	}
	q := recordProbe(r, "/templates/aliases/"+url.PathEscape(strings.TrimPrefix(key, "tpl/")))
	q.held = func(s int) bool { return s == http.StatusOK || s == http.StatusForbidden }
	return g.probe(ctx, nodes, q, "template "+ref)
}

// serveBuildCache forwards GET /templates/builds/cache to the node the
// team's templates are built on: its step cache is there.
func (g templateRouter) serveBuildCache(w http.ResponseWriter, r *http.Request, rt route, k key) {
	ready, err := g.readyOrUnavailable(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	g.forward(w, r, buildNode(ready, k.team), rt, nil)
}

// serveTemplateOrBuilt serves /templates/{id}: a built template's node
// answers alone (so its own refusal, a 409 for a parent of others, is
// the answer); anything else goes to every Ready node.
func (g templateRouter) serveTemplateOrBuilt(w http.ResponseWriter, r *http.Request, rt route) {
	if n, ok := g.builtHolder(r.Context(), r, rt.id); ok {
		g.forward(w, r, n, rt, nil)
		return
	}
	g.serveTemplate(w, r)
}

// builtHolder is the node of the caller's built template a create names
// (false when it names none).
func (g templateRouter) builtHolder(ctx context.Context, r *http.Request, ref string) (Node, bool) {
	n, err := g.locateBuilt(ctx, r, ref, false)
	return n, err == nil
}
