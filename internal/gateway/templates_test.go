package gateway

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	wapi "github.com/warrenhq/warren/client"
)

// The template build API's paths go to the template's node (by the id or
// name in the path, or the body for tags), the build request and the step
// cache to placement; server templates keep their routes.
func TestClassifyBuiltTemplates(t *testing.T) {
	cases := []struct {
		method, target string
		want           route
	}{
		{"POST", "/v3/templates", route{kind: routeTplBuild}},
		{"GET", "/templates/tpl1/files/abcd", route{kind: routeTpl, id: "tpl1"}},
		{"PUT", "/templates/tpl1/files/abcd", route{kind: routeTpl, id: "tpl1"}},
		{"POST", "/v2/templates/tpl1/builds/b1", route{kind: routeTpl, id: "tpl1"}},
		{"GET", "/templates/tpl1/builds/b1/status?logsOffset=3", route{kind: routeTpl, id: "tpl1"}},
		{"GET", "/templates/tpl1/tags", route{kind: routeTpl, id: "tpl1"}},
		{"GET", "/templates/aliases/my-env", route{kind: routeTpl, id: "my-env", alias: true}},
		{"POST", "/templates/tags", route{kind: routeTplTags}},
		{"DELETE", "/templates/tags", route{kind: routeTplTags}},
		{"GET", "/templates/builds/cache", route{kind: routeTplCache}},
		{"GET", "/templates", route{kind: routeList, list: listTemplates}},
		{"GET", "/templates/my-env", route{kind: routeTemplate, id: "my-env"}},
		{"DELETE", "/templates/my-env", route{kind: routeTemplate, id: "my-env"}},
	}
	for _, c := range cases {
		if got := classify(httptest.NewRequest(c.method, c.target, nil), ""); got != c.want {
			t.Errorf("%s %s: %+v, want %+v", c.method, c.target, got, c.want)
		}
	}
}

// A team's new templates go to one node among those holding base, the
// same from any replica and whatever the order the nodes come in.
func TestBuildNode(t *testing.T) {
	nodes := []Node{{Name: "a", Templates: []string{"base"}}, {Name: "b"}, {Name: "c", Templates: []string{"base"}}, {Name: "d", Templates: []string{"base"}}}
	seen := map[string]bool{}
	for _, team := range []string{"t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8"} {
		n := buildNode(nodes, team)
		if n.Name == "b" {
			t.Fatalf("team %s: built on b, which lacks base", team)
		}
		rev := []Node{nodes[3], nodes[2], nodes[1], nodes[0]}
		if buildNode(rev, team).Name != n.Name {
			t.Fatalf("team %s: the node depends on the nodes' order", team)
		}
		seen[n.Name] = true
	}
	if len(seen) < 2 {
		t.Errorf("eight teams all went to %v: want them spread", seen)
	}
	if n := buildNode([]Node{{Name: "x"}, {Name: "y"}}, "t1"); n.Name == "" {
		t.Error("with no node holding base, any Ready node builds")
	}
}

// holdTemplate makes the stub hold a built template by name.
func (n *stubNode) holdTemplate(name string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.templates == nil {
		n.templates = map[string]bool{}
	}
	n.templates[name] = true
}

// templateProbe answers what the gateway asks to find a built template
// or a snapshot (GET /templates/{ref}, /templates/aliases/{name},
// /snapshots/{id}) as a node does: 200 when held, else 404.
func (n *stubNode) templateProbe(w http.ResponseWriter, segs []string) bool {
	var ref string
	switch {
	case len(segs) == 2 && segs[0] == "templates", len(segs) == 2 && segs[0] == "snapshots":
		ref = segs[1]
	case len(segs) == 3 && segs[0] == "templates" && segs[1] == "aliases":
		ref = segs[2]
	default:
		return false
	}
	n.mu.Lock()
	held := segs[0] == "templates" && n.templates[strings.Split(ref, ":")[0]]
	n.mu.Unlock()
	if !held {
		writeJSON(w, http.StatusNotFound, wapi.Error{Code: 404, Message: ref + ": not found"})
		return true
	}
	writeJSON(w, http.StatusOK, map[string]string{"templateID": ref})
	return true
}

// templateBuilds: a built template's calls go to the node holding it
// (found by probe, then memoised), a create of it is placed there, and a
// new template's build request goes to the team's build node.
func (f *fleetTest) templateBuilds(t *testing.T) {
	f.b.holdTemplate("tb")
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{"GET", "/templates/tb/builds/b1/status", nil},
		{"GET", "/templates/tb/files/abcd", nil},
		{"POST", "/v2/templates/tb/builds/b1", map[string]any{"steps": []any{}}},
		{"GET", "/templates/aliases/tb", nil},
		{"GET", "/templates/tb/tags", nil},
		{"POST", "/templates/tags", map[string]any{"target": "tb:v1", "tags": []string{"x"}}},
		{"GET", "/templates/tb:v1", nil},
		{"DELETE", "/templates/tb", nil},
	} {
		res, body := f.call(f.gw, c.method, c.path, f.admin, c.body)
		if res.StatusCode != http.StatusOK || res.Header.Get("X-Stub-Node") != "b" {
			t.Fatalf("%s %s: %d from %q: %s", c.method, c.path, res.StatusCode, res.Header.Get("X-Stub-Node"), body)
		}
	}
	// a has more free memory, but only b can start a sandbox of tb.
	res, body := f.call(f.gw, "POST", "/sandboxes", f.admin, wapi.NewSandbox{TemplateID: "tb:v1"})
	if res.StatusCode != http.StatusCreated || res.Header.Get("X-Stub-Node") != "b" {
		t.Fatalf("create of a built template: %d from %q: %s", res.StatusCode, res.Header.Get("X-Stub-Node"), body)
	}
	want := buildNode([]Node{{Name: "a", Templates: []string{"base"}}, {Name: "b", Templates: []string{"base"}}}, adminTeam).Name
	res, body = f.call(f.gw, "POST", "/v3/templates", f.admin, map[string]string{"name": "fresh"})
	if res.StatusCode != http.StatusOK || res.Header.Get("X-Stub-Node") != want {
		t.Fatalf("a new template's build request: %d from %q, want %s: %s", res.StatusCode, res.Header.Get("X-Stub-Node"), want, body)
	}
	res, body = f.call(f.gw, "POST", "/v3/templates", f.admin, map[string]string{"alias": "tb"})
	if res.StatusCode != http.StatusOK || res.Header.Get("X-Stub-Node") != "b" {
		t.Fatalf("a rebuild's request: %d from %q: %s", res.StatusCode, res.Header.Get("X-Stub-Node"), body)
	}
	if res, body := f.call(f.gw, "GET", "/templates/nosuch/tags", f.admin, nil); res.StatusCode != http.StatusNotFound {
		t.Fatalf("a template no node holds: %d %s", res.StatusCode, body)
	}
}
