package gateway

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestClassify(t *testing.T) {
	cases := []struct {
		method, target, host string
		header               string // E2b-Sandbox-Id
		domain               string
		want                 route
	}{
		{"GET", "/health", "gw", "", "", route{kind: routeHealth}},
		{"GET", "/metrics", "gw", "", "", route{kind: routeMetrics}},
		{"POST", "/sandboxes", "gw", "", "", route{kind: routeCreate}},
		{"POST", "/v2/sandboxes", "gw", "", "", route{kind: routeCreate}},
		{"GET", "/sandboxes?state=running", "gw", "", "", route{kind: routeList, list: listSandboxes}},
		{"GET", "/v2/sandboxes", "gw", "", "", route{kind: routeList, list: listSandboxes}},
		{"GET", "/sandboxes/abc", "gw", "", "", route{kind: routeSandbox, id: "abc"}},
		{"POST", "/sandboxes/abc/connect", "gw", "", "", route{kind: routeSandbox, id: "abc"}},
		{"POST", "/v2/sandboxes/abc/connect", "gw", "", "", route{kind: routeSandbox, id: "abc"}},
		{"GET", "/v2/sandboxes/abc/logs", "gw", "", "", route{kind: routeSandbox, id: "abc"}},
		{"GET", "/sandboxes/abc/ports/8080/connect", "gw", "", "", route{kind: routeSandbox, id: "abc"}},
		{"GET", "/snapshots", "gw", "", "", route{kind: routeList, list: listSnapshots}},
		{"GET", "/snapshots/s1", "gw", "", "", route{kind: routeSnapshot, id: "s1"}},
		{"GET", "/snapshots/s1/export?base=s0", "gw", "", "", route{kind: routeSnapshot, id: "s1"}},
		{"POST", "/snapshots/import", "gw", "", "", route{kind: routeImport}},
		{"GET", "/templates", "gw", "", "", route{kind: routeList, list: listTemplates}},
		{"DELETE", "/templates/base", "gw", "", "", route{kind: routeTemplate, id: "base"}},
		{"POST", "/api-keys", "gw", "", "", route{kind: routeKeys}},
		{"DELETE", "/api-keys/k1", "gw", "", "", route{kind: routeKeys, id: "k1"}},
		{"GET", "/fleet/nodes", "gw", "", "", route{kind: routeNodes}},
		{"GET", "/openapi.json", "gw", "", "", route{kind: routeOther}},
		{"GET", "/tools", "gw", "", "", route{kind: routeOther}},
		{"POST", "/mcp", "gw", "", "", route{kind: routeUnrouted}},
		{"POST", "/process.Process/Start", "gw", "", "", route{kind: routeUnrouted}},
		// The sandbox plane: the header wins over the path.
		{"POST", "/process.Process/Start", "gw", "ABC", "", route{kind: routePlane, id: "abc"}},
		{"GET", "/files?path=/x", "49983-abc.sb.example", "", "sb.example", route{kind: routePlane, id: "abc", byHost: true, port: 49983}},
		{"GET", "/", "8080-abc.sb.example:3000", "", "sb.example", route{kind: routePlane, id: "abc", byHost: true, port: 8080}},
		{"GET", "/", "8080-abc.sb.example", "", "", route{kind: routePlane, id: "abc", byHost: true, port: 8080}},
		// Another domain's Host, or a host name that only looks alike.
		{"GET", "/health", "8080-abc.other.example", "", "sb.example", route{kind: routeHealth}},
		{"GET", "/health", "warren-gateway.svc", "", "", route{kind: routeHealth}},
		{"GET", "/health", "127.0.0.1:3000", "", "", route{kind: routeHealth}},
	}
	for _, c := range cases {
		r := httptest.NewRequest(c.method, c.target, nil)
		r.Host = c.host
		if c.header != "" {
			r.Header.Set("E2b-Sandbox-Id", c.header)
		}
		if got := classify(r, c.domain); got != c.want {
			t.Errorf("%s %s (Host %s, header %q, domain %q) = %+v, want %+v", c.method, c.target, c.host, c.header, c.domain, got, c.want)
		}
	}
}

func TestAPIKeyOf(t *testing.T) {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	if k := apiKeyOf(r); k != "" {
		t.Fatalf("no key: %q", k)
	}
	r.Header.Set("Authorization", "Bearer e2b_b")
	if k := apiKeyOf(r); k != "e2b_b" {
		t.Fatalf("bearer: %q", k)
	}
	r.Header.Set("X-API-Key", "e2b_x")
	if k := apiKeyOf(r); k != "e2b_x" {
		t.Fatalf("X-API-Key first: %q", k)
	}
}

func TestIsForkPath(t *testing.T) {
	for path, want := range map[string]bool{"/sandboxes/a/fork": true, "/v2/sandboxes/a/fork/": true, "/sandboxes/a/connect": false, "/sandboxes/fork": false, "/sandboxes/a/fork/x": false} {
		if got := isForkPath(path); got != want {
			t.Errorf("isForkPath(%q) = %v", path, got)
		}
	}
}
