package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	warrenv1 "github.com/warrenhq/warren/apis/warren/v1alpha1"
	wapi "github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/kube/fleet"
)

// makeLost makes the Sandbox object of a sandbox Lost with node "gone"
// (no WarrenNode: never Ready), started at.
func (f *fleetTest) makeLost(t *testing.T, id, team string, at time.Time) {
	ctx, c := t.Context(), f.env.Client
	sb := &warrenv1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Name: id, Namespace: testNS, Labels: map[string]string{
			fleet.LabelSandboxID: id, fleet.LabelNode: "gone", fleet.LabelOrigin: fleet.OriginAPI, fleet.LabelTeam: team,
		}},
		Spec: warrenv1.SandboxSpec{Template: "base", Metadata: map[string]string{"k": "v"}},
	}
	if err := c.Create(ctx, sb); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), sb) })
	started := metav1.NewTime(at)
	sb.Status = warrenv1.SandboxStatus{Phase: warrenv1.SandboxLost, Node: "gone", SandboxID: id, StartedAt: &started}
	if err := c.Status().Update(ctx, sb); err != nil {
		t.Fatal(err)
	}
}

// A Lost sandbox is in the lists of its team, once, in its place by start
// time in either order and across pages, with state lost; the filters
// apply to it as a node applies them.
func (f *fleetTest) listLost(t *testing.T) {
	f.makeLost(t, "lostsb", adminTeam, time.Now().Add(-30*time.Minute))
	f.makeLost(t, "otherlost", "other-team", time.Now().Add(-30*time.Minute))
	var asc []string
	eventually(t, "the Lost sandbox in the list", func() error {
		asc = f.pageAll(t, "/sandboxes?limit=3&order=asc", nil)
		if !slices.Contains(asc, "lostsb") {
			return errors.New("lostsb not listed")
		}
		return nil
	})
	if slices.Contains(asc, "otherlost") || len(slices.DeleteFunc(slices.Clone(asc), func(id string) bool { return id != "lostsb" })) != 1 {
		t.Fatalf("list %v: want lostsb once and no other team's", asc)
	}
	desc := f.pageAll(t, "/v2/sandboxes?limit=3", nil)
	slices.Reverse(desc)
	if !slices.Equal(desc, asc) {
		t.Fatalf("newest first, reversed %v: want %v", desc, asc)
	}
	res, body := f.call(f.gw, "GET", "/v2/sandboxes?limit=1000&metadata=k%3Dv&template=base", f.admin, nil)
	var page []wapi.SandboxDetail
	if res.StatusCode != http.StatusOK || json.Unmarshal(body, &page) != nil {
		t.Fatalf("filtered list: %d %s", res.StatusCode, body)
	}
	i := slices.IndexFunc(page, func(d wapi.SandboxDetail) bool { return d.SandboxID == "lostsb" })
	if i < 0 || page[i].State != stateLost || page[i].Metadata["k"] != "v" {
		t.Fatalf("filtered list %s: want lostsb with state lost", body)
	}
	for _, q := range []string{"state=running", "metadata=k%3Dw", "template=other", "startedAfter=" + time.Now().UTC().Format(time.RFC3339)} {
		res, body := f.call(f.gw, "GET", "/sandboxes?limit=1000&"+q, f.admin, nil)
		if res.StatusCode != http.StatusOK || json.Unmarshal(body, &page) != nil {
			t.Fatalf("list ?%s: %d %s", q, res.StatusCode, body)
		}
		if slices.ContainsFunc(page, func(d wapi.SandboxDetail) bool { return d.SandboxID == "lostsb" }) {
			t.Errorf("list ?%s holds lostsb: %s", q, body)
		}
	}
}
