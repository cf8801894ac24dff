package gateway

import (
	"net/http/httptest"
	"testing"
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
