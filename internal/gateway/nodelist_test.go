package gateway

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	warrenv1 "github.com/warrenhq/warren/apis/warren/v1alpha1"
	"github.com/warrenhq/warren/internal/store"
)

// teamsOf is a key table: a key's hash to its team.
type teamsOf map[string]string

func (t teamsOf) KeyTeam(hash string) (string, bool) { team, ok := t[hash]; return team, ok }

func TestFleetNodesListsCapacityAndUse(t *testing.T) {
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	wn := &warrenv1.WarrenNode{}
	wn.Status.Capacity = warrenv1.NodeResources{Memory: q("8Gi"), CPU: q("4"), Disk: q("100Gi"), Sandboxes: 50}
	wn.Status.Used = warrenv1.NodeResources{Memory: q("1Gi"), CPU: q("1500m"), Sandboxes: 3}
	fleet := staticFleet{
		{Name: "node-b", Ready: false, Unschedulable: true},
		{Name: "node-a", Ready: true, Runtimes: []string{"runc"}, Templates: []string{"base"}, Sandboxes: 3, Object: wn, Endpoint: "http://10.0.0.1:8080"},
	}
	keys := &keyStore{teams: teamsOf{store.HashKey("team-key"): "t1"}}
	g := newGateway(Config{}, slog.New(slog.DiscardHandler), fleet, keys, nil)
	do := func(method, key string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, "/fleet/nodes", nil)
		if key != "" {
			r.Header.Set("X-API-Key", key)
		}
		w := httptest.NewRecorder()
		g.ServeHTTP(w, r)
		return w
	}
	if w := do("GET", ""); w.Code != http.StatusUnauthorized {
		t.Fatalf("without a key: %d, want 401", w.Code)
	}
	if w := do("GET", "wrong"); w.Code != http.StatusUnauthorized {
		t.Fatalf("with a bad key: %d, want 401", w.Code)
	}
	if w := do("POST", "team-key"); w.Code != http.StatusBadRequest {
		t.Fatalf("POST: %d, want 400", w.Code)
	}
	w := do("GET", "team-key")
	if w.Code != http.StatusOK {
		t.Fatalf("GET: %d %s", w.Code, w.Body)
	}
	var got []FleetNode
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Name != "node-a" || got[1].Name != "node-b" {
		t.Fatalf("nodes %+v, want node-a then node-b", got)
	}
	a := got[0]
	want := FleetNodeAmount{MemoryBytes: 8 << 30, MilliCPU: 4000, DiskBytes: 100 << 30, Sandboxes: 50}
	if !a.Ready || a.Capacity != want {
		t.Fatalf("node-a capacity %+v ready %v, want %+v", a.Capacity, a.Ready, want)
	}
	if a.Used != (FleetNodeAmount{MemoryBytes: 1 << 30, MilliCPU: 1500, Sandboxes: 3}) {
		t.Fatalf("node-a use %+v", a.Used)
	}
	if b := got[1]; b.Ready || !b.Unschedulable || b.Runtimes == nil || b.Capacity != (FleetNodeAmount{}) {
		t.Fatalf("node-b %+v", b)
	}
	if strings.Contains(w.Body.String(), "10.0.0.1") {
		t.Fatal("the list shows a node's inside endpoint")
	}
}
