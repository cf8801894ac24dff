package client

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
)

func TestSnapshots(t *testing.T) {
	c := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		q := r.URL.Query()
		switch r.Method + " " + r.URL.EscapedPath() {
		case "POST /sandboxes/sb%201/snapshots":
			var in NewSnapshot
			if err := json.Unmarshal(body, &in); err != nil || in.Name != "before" || in.Labels["k"] != "v" {
				t.Errorf("create body %s (%v)", body, err)
			}
			writeJSON(w, 201, Snapshot{SnapshotID: "sn1", Name: in.Name, Kind: "named", SandboxID: "sb 1"})
		case "POST /sandboxes/sb/turns":
			if len(body) != 0 {
				t.Errorf("turn sent a body: %s", body)
			}
			writeJSON(w, 201, Snapshot{SnapshotID: "sn2", Name: "turn-3", Kind: "turn", Turn: 3})
		case "GET /snapshots":
			if got, want := r.URL.RawQuery, "limit=5&name=n&nextToken=t1&sandboxID=sb&state=ready&state=deleted"; got != want {
				t.Errorf("list query = %s, want %s", got, want)
			}
			w.Header().Set("X-Next-Token", "t2")
			writeJSON(w, 200, []Snapshot{{SnapshotID: "sn1"}, {SnapshotID: "sn2", State: "deleted"}})
		case "GET /snapshots/sn%2F1":
			writeJSON(w, 200, Snapshot{SnapshotID: "sn/1", ExclusiveBytes: -1})
		case "DELETE /snapshots/sn1":
			w.WriteHeader(http.StatusNoContent)
		case "POST /sandboxes/sb/rollback":
			var in RollbackRequest
			if err := json.Unmarshal(body, &in); err != nil || in.SnapshotID != "sn1" || !in.Force {
				t.Errorf("rollback body %s (%v)", body, err)
			}
			writeJSON(w, 200, RollbackResult{Sandbox: SandboxDetail{Sandbox: Sandbox{SandboxID: "sb"}, Head: "sn1"},
				SnapshotID: "sn1", ProcessesRestarted: true})
		case "POST /sandboxes/sb/fork":
			var in ForkRequest
			if err := json.Unmarshal(body, &in); err != nil || in.SnapshotID != "sn1" || in.Count != 2 || in.Metadata["a"] != "b" {
				t.Errorf("fork body %s (%v)", body, err)
			}
			writeJSON(w, 201, []ForkResult{{Sandbox: &Sandbox{SandboxID: "f1"}}, {Error: &Error{Code: 429, Message: "limit"}}})
		case "GET /snapshots/sn1/diff":
			if q.Get("to") != "live" || q.Get("content") != "" {
				t.Errorf("diff query %s", r.URL.RawQuery)
			}
			writeJSON(w, 200, Diff{From: "sn1", To: "live", Added: 1, Changes: []DiffEntry{{Path: "/a", Change: "added"}}})
		case "GET /snapshots/sn2/diff":
			if q.Get("to") != "sn3" || q.Get("content") != "true" {
				t.Errorf("diff query %s", r.URL.RawQuery)
			}
			writeJSON(w, 200, Diff{From: "sn2", To: "sn3"})
		case "GET /sandboxes/sb/lineage":
			writeJSON(w, 200, Lineage{Family: "fam", Template: "base", Nodes: []LineageNode{{ID: "sb", Type: "sandbox"}}})
		case "POST /sandboxes/f1/promote":
			writeJSON(w, 200, RollbackResult{Sandbox: SandboxDetail{Sandbox: Sandbox{SandboxID: "sb"}}, SnapshotID: "sn9",
				PreviousSnapshotID: "sn8", ProcessesRestarted: true})
		default:
			t.Errorf("unexpected %s %s", r.Method, r.URL)
			w.WriteHeader(500)
		}
	})
	ctx := context.Background()

	s, err := c.Snapshots.Create(ctx, "sb 1", NewSnapshot{Name: "before", Labels: map[string]string{"k": "v"}})
	if err != nil || s.SnapshotID != "sn1" || s.Kind != "named" {
		t.Fatalf("CreateSnapshot = %+v, %v", s, err)
	}
	if s, err := c.Snapshots.Turn(ctx, "sb"); err != nil || s.Name != "turn-3" || s.Turn != 3 {
		t.Fatalf("Turn = %+v, %v", s, err)
	}
	list, next, err := c.Snapshots.List(ctx, SnapshotListOptions{SandboxID: "sb", Name: "n", States: []string{"ready", "deleted"},
		Limit: 5, NextToken: "t1"})
	if err != nil || next != "t2" || len(list) != 2 || list[1].State != "deleted" {
		t.Fatalf("ListSnapshots = %+v, %q, %v", list, next, err)
	}
	if s, err := c.Snapshots.Get(ctx, "sn/1"); err != nil || s.SnapshotID != "sn/1" || s.ExclusiveBytes != -1 {
		t.Fatalf("GetSnapshot = %+v, %v", s, err)
	}
	if err := c.Snapshots.Delete(ctx, "sn1"); err != nil {
		t.Fatal(err)
	}
	rb, err := c.Snapshots.Rollback(ctx, "sb", RollbackRequest{SnapshotID: "sn1", Force: true})
	if err != nil || rb.SnapshotID != "sn1" || !rb.ProcessesRestarted || rb.Sandbox.Head != "sn1" {
		t.Fatalf("Rollback = %+v, %v", rb, err)
	}
	forks, err := c.Snapshots.Fork(ctx, "sb", ForkRequest{SnapshotID: "sn1", Count: 2, Metadata: map[string]string{"a": "b"}})
	if err != nil || len(forks) != 2 || forks[0].Sandbox.SandboxID != "f1" || forks[1].Error.Code != 429 {
		t.Fatalf("Fork = %+v, %v", forks, err)
	}
	if d, err := c.Snapshots.Diff(ctx, "sn1", "", false); err != nil || d.Added != 1 || len(d.Changes) != 1 {
		t.Fatalf("Diff to live = %+v, %v", d, err)
	}
	if d, err := c.Snapshots.Diff(ctx, "sn2", "sn3", true); err != nil || d.To != "sn3" {
		t.Fatalf("Diff = %+v, %v", d, err)
	}
	if l, err := c.Snapshots.Lineage(ctx, "sb"); err != nil || l.Template != "base" || len(l.Nodes) != 1 {
		t.Fatalf("Lineage = %+v, %v", l, err)
	}
	p, err := c.Snapshots.Promote(ctx, "f1")
	if err != nil || p.Sandbox.SandboxID != "sb" || p.PreviousSnapshotID != "sn8" {
		t.Fatalf("Promote = %+v, %v", p, err)
	}
}

func TestSnapshotErrors(t *testing.T) {
	c := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 409, Error{Code: 409, Message: "sandbox sb is running commands: pass force to kill them"})
	})
	_, err := c.Snapshots.Rollback(context.Background(), "sb", RollbackRequest{SnapshotID: "sn1"})
	if StatusCode(err) != 409 || err.Error() != "sandbox sb is running commands: pass force to kill them" {
		t.Fatalf("err = %v", err)
	}
	if _, _, err := c.Snapshots.List(context.Background(), SnapshotListOptions{}); StatusCode(err) != 409 {
		t.Fatalf("ListSnapshots err = %v", err)
	}
	if _, err := c.Snapshots.Fork(context.Background(), "sb", ForkRequest{}); StatusCode(err) != 409 {
		t.Fatalf("Fork err = %v", err)
	}
}
