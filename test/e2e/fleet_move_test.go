package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/client"
)

// move posts POST /sandboxes/{id}/move to gateway 0 and returns the status
// and body of the answer.
func (f *fleetT) move(ctx context.Context, id, query, body string) (int, string) {
	f.t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+f.gateways[0].addr+"/sandboxes/"+id+"/move"+query, strings.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	req.Header.Set("X-API-Key", f.adminKey(ctx))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// TestFleetMove: a paused sandbox with a file moves to the other node under
// its id and resumes there with the file, the source keeping no trace of
// it; a running one moves with ?stop=true (its files, marked so); bad moves
// get clear 4xx answers.
func TestFleetMove(t *testing.T) {
	t.Parallel()
	f := startFleet(t, 2, 1)
	ctx := ctxT(t, 5*time.Minute)
	g := f.client(ctx, 0)

	mk := func(mark string) (string, string) {
		sb, err := g.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", Metadata: map[string]string{"who": mark}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := g.Commands.ExecWait(ctx, sb.SandboxID, client.ExecRequest{Command: "echo " + mark + " > /tmp/mark && sync"}); err != nil {
			t.Fatal(err)
		}
		return sb.SandboxID, f.sandboxNode(ctx, sb.SandboxID)
	}
	paused, from := mk("paused")
	if err := g.Lifecycle.Pause(ctx, paused); err != nil {
		t.Fatal(err)
	}
	other := f.nodes[0].name
	if other == from {
		other = f.nodes[1].name
	}

	// Bad input.
	for _, c := range []struct{ id, query, body string }{
		{paused, "", `{"node":"nowhere"}`},
		{paused, "", `{"node":"` + from + `"}`},
		{paused, "", `{"node":`},
	} {
		if st, body := f.move(ctx, c.id, c.query, c.body); st/100 != 4 {
			t.Errorf("move %s %s: %d %s, want a 4xx", c.id, c.body, st, body)
		} else {
			t.Logf("move %s %s: %d %s", c.id, c.body, st, strings.TrimSpace(body))
		}
	}

	began := time.Now()
	if st, body := f.move(ctx, paused, "", `{"node":"`+other+`"}`); st != http.StatusOK {
		t.Fatalf("move the paused sandbox: %d %s", st, body)
	}
	t.Logf("moved a paused sandbox %s → %s in %s", from, other, time.Since(began).Round(time.Millisecond))
	waitFor(t, 30*time.Second, "the Sandbox object on the new node", func() bool { return f.sandboxNode(ctx, paused) == other })
	src := f.nodes[0].d
	if f.nodes[1].name == from {
		src = f.nodes[1].d
	}
	srcClient := client.New("http://"+src.addr, f.adminKey(ctx))
	if list, _, err := srcClient.Sandboxes.List(ctx, client.ListOptions{}); err != nil || len(list) != 0 {
		t.Errorf("the source node still lists %d sandboxes (%v)", len(list), err)
	}
	if _, err := g.Lifecycle.Resume(ctx, paused); err != nil {
		t.Fatalf("resume the moved sandbox: %v", err)
	}
	res, err := g.Commands.ExecWait(ctx, paused, client.ExecRequest{Command: "cat /tmp/mark"})
	if err != nil || res.Stdout != "paused\n" {
		t.Errorf("the moved sandbox's file: %+v %v", res, err)
	}

	// A running sandbox moves only when asked to stop it.
	running, rfrom := mk("running")
	if st, body := f.move(ctx, running, "", `{}`); st != http.StatusConflict {
		t.Errorf("move a running sandbox without ?stop: %d %s, want 409", st, body)
	}
	st, body := f.move(ctx, running, "?stop=true", `{}`)
	var moved client.MoveResult
	if err := json.Unmarshal([]byte(body), &moved); st != http.StatusOK || err != nil || moved.To == rfrom || moved.From != rfrom {
		t.Fatalf("move a running sandbox with ?stop=true: %d %s", st, body)
	}
	if _, err := g.Lifecycle.Resume(ctx, running); err != nil {
		t.Fatalf("resume the moved running sandbox: %v", err)
	}
	res, err = g.Commands.ExecWait(ctx, running, client.ExecRequest{Command: "cat /tmp/mark"})
	if err != nil || res.Stdout != "running\n" {
		t.Errorf("the moved running sandbox's file: %+v %v", res, err)
	}

	f.drainOneRunningOnePaused(ctx, g, paused, running, moved.To, other)
}

// drainOneRunningOnePaused gathers a paused and a running sandbox on node
// x, drains x with warren node drain and checks that both are on the
// other node with their files and x holds none.
func (f *fleetT) drainOneRunningOnePaused(ctx context.Context, g *client.Client, paused, running, runningAt, x string) {
	t := f.t
	if runningAt != x {
		if st, body := f.move(ctx, running, "?stop=true", `{"node":"`+x+`"}`); st != http.StatusOK {
			t.Fatalf("move the running sandbox to %s: %d %s", x, st, body)
		}
		if _, err := g.Lifecycle.Resume(ctx, running); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.Lifecycle.Pause(ctx, paused); err != nil {
		t.Fatal(err)
	}
	d, rest := f.nodes[0], f.nodes[1]
	if d.name != x {
		d, rest = rest, d
	}
	began := time.Now()
	out, errOut, code := d.d.cli("", "node", "drain", x, "--kubeconfig", f.kubeconfig, "--kube-namespace", f.ns,
		"--url", "http://"+f.gateways[0].addr, "--api-key", f.adminKey(ctx))
	if code != 0 {
		t.Fatalf("warren node drain %s: exit %d\n%s%s", x, code, out, errOut)
	}
	t.Logf("drained %s (one running, one paused) in %s:\n%s", x, time.Since(began).Round(time.Millisecond), out)
	if list, _, err := client.New("http://"+d.d.addr, f.adminKey(ctx)).Sandboxes.List(ctx, client.ListOptions{}); err != nil || len(list) != 0 {
		t.Errorf("the drained node still lists %d sandboxes (%v)", len(list), err)
	}
	for id, mark := range map[string]string{paused: "paused\n", running: "running\n"} {
		waitFor(t, 30*time.Second, "the Sandbox object of "+id+" on "+rest.name, func() bool { return f.sandboxNode(ctx, id) == rest.name })
		if _, err := g.Lifecycle.Resume(ctx, id); err != nil {
			t.Fatalf("resume %s after the drain: %v", id, err)
		}
		if res, err := g.Commands.ExecWait(ctx, id, client.ExecRequest{Command: "cat /tmp/mark"}); err != nil || res.Stdout != mark {
			t.Errorf("%s's file after the drain: %+v %v", id, res, err)
		}
	}
	if _, errOut, code := d.d.cli("", "node", "uncordon", x, "--kubeconfig", f.kubeconfig); code != 0 {
		t.Errorf("warren node uncordon %s: exit %d %s", x, code, errOut)
	}
}
