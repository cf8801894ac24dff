package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/warrenhq/warren/client"
)

func TestCLINodes(t *testing.T) {
	nodes := []client.FleetNode{
		{Name: "node-a", Ready: true, Runtimes: []string{"runc", "gvisor"},
			Capacity: client.FleetNodeAmount{MemoryBytes: 8 << 30, MilliCPU: 4000, Sandboxes: 50},
			Used:     client.FleetNodeAmount{MemoryBytes: 1 << 30, MilliCPU: 1500, Sandboxes: 3}},
		{Name: "node-b", Unschedulable: true, Runtimes: []string{}},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-API-Key") != "k" {
			http.Error(w, `{"code":401,"message":"bad key"}`, http.StatusUnauthorized)
			return
		}
		if r.Method != http.MethodGet || r.URL.Path != "/fleet/nodes" {
			http.Error(w, `{"code":404,"message":"no route"}`, http.StatusNotFound)
			return
		}
		_ = json.NewEncoder(w).Encode(nodes)
	}))
	defer srv.Close()
	env := map[string]string{"WARREN_URL": srv.URL, "WARREN_API_KEY": "k"}
	r := cli(t, env, "", "nodes").must(t, 0)
	for _, want := range []string{"node-a", "ready", "3/50", "1GiB/8GiB", "1.5/4.0", "runc,gvisor", "node-b", "not ready, cordoned"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("nodes printed %q, without %q", r.stdout, want)
		}
	}
	r = cli(t, env, "", "--json", "nodes").must(t, 0)
	var got []client.FleetNode
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || len(got) != 2 || got[0].Capacity.MilliCPU != 4000 {
		t.Fatalf("nodes --json printed %q (%v)", r.stdout, err)
	}
	cli(t, map[string]string{"WARREN_URL": srv.URL, "WARREN_API_KEY": "bad"}, "", "nodes").must(t, 1)
}
