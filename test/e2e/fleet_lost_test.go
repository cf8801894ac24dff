package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	warrenv1 "github.com/warrenhq/warren/apis/warren/v1alpha1"
	"github.com/warrenhq/warren/client"
)

// post sends a POST with the fleet's admin key to base+path and returns
// the status and body of the answer.
func (f *fleetT) post(ctx context.Context, base, path, body string) (int, string) {
	f.t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, strings.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	req.Header.Set("X-API-Key", f.adminKey(ctx))
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// TestFleetLostRestore: a paused sandbox and a hibernated gVisor one are
// copied to a second node by the gateway's controller; their node is
// killed (kill -9) and its Lease lapses; they turn Lost, and a connect
// through the gateway restores each on its copy's node with its file (and
// the gVisor one with its memory: the same process counts on). A
// running sandbox of the lost node (no copy) answers a clear 409 instead.
// The sandboxes are used through a gateway other than the one that
// restores them. When the lost node comes back it destroys its stale copy
// of the restored sandbox (it exists once, on the copy's node) and takes
// the other back.
func TestFleetLostRestore(t *testing.T) {
	t.Parallel()
	f := startFleet(t, 3, 2)
	ctx := ctxT(t, 6*time.Minute)
	// Made and used through gateway 1, which remembers their node;
	// restored through gateway 0.
	g := f.client(ctx, 1)
	gw := "http://" + f.gateways[0].addr

	gv, err := g.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", Runtime: "gvisor"})
	if err != nil {
		t.Fatal(err)
	}
	home := f.sandboxNode(ctx, gv.SandboxID)
	paused := f.createOn(ctx, g, home, client.NewSandbox{TemplateID: "bb", Metadata: map[string]string{"who": "paused"}})
	running := f.createOn(ctx, g, home, client.NewSandbox{TemplateID: "bb"}).SandboxID
	for _, id := range []string{paused.SandboxID, gv.SandboxID} {
		if _, err := g.Commands.ExecWait(ctx, id, client.ExecRequest{Command: "echo kept > /tmp/mark && sync"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.Lifecycle.Pause(ctx, paused.SandboxID); err != nil {
		t.Fatal(err)
	}
	pausedAt := time.Now()
	var rep, gvRep *warrenv1.SandboxReplica
	waitFor(t, time.Minute, "the paused sandbox's replica", func() bool {
		o, _ := f.object(ctx, paused.SandboxID)
		rep = o.Status.Replica
		return rep != nil && rep.Node != home
	})
	t.Logf("replica of %s (on %s): node %s, snapshot %s, recorded %s after the pause", paused.SandboxID, home, rep.Node, rep.Snapshot, time.Since(pausedAt).Round(time.Millisecond))
	ticker, err := g.Processes.Start(ctx, gv.SandboxID, client.StartProcessRequest{Tag: "ticker", ExecRequest: sh(tickerScript)})
	if err != nil {
		t.Fatal(err)
	}
	last := counterPast(t, ctx, g, gv.SandboxID, 5)
	if _, err := g.Lifecycle.Hibernate(ctx, gv.SandboxID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "the hibernated gVisor sandbox's replica", func() bool {
		og, _ := f.object(ctx, gv.SandboxID)
		gvRep = og.Status.Replica
		return gvRep != nil && gvRep.Node != home
	})
	t.Logf("replica of the gVisor one: node %s", gvRep.Node)

	var lost *fleetMember
	for _, m := range f.nodes {
		if m.name == home {
			lost = m
		}
	}
	lost.d.stop(syscall.SIGKILL)
	waitFor(t, time.Minute, "both sandboxes of the killed node Lost", func() bool {
		a, _ := f.object(ctx, paused.SandboxID)
		b, _ := f.object(ctx, running)
		c, _ := f.object(ctx, gv.SandboxID)
		return a.Status.Phase == warrenv1.SandboxLost && b.Status.Phase == warrenv1.SandboxLost && c.Status.Phase == warrenv1.SandboxLost
	})
	// The gateway's watch cache follows the API server closely, not at once.
	waitFor(t, 10*time.Second, "GET of both through the gateway with state lost", func() bool {
		a, errA := g.Sandboxes.Get(ctx, paused.SandboxID)
		b, errB := g.Sandboxes.Get(ctx, running)
		return errA == nil && errB == nil && a.State == "lost" && b.State == "lost"
	})
	// No Ready node lists it: the gateway does, from its object.
	listed, _, err := g.Sandboxes.List(ctx, client.ListOptions{Limit: 1000})
	if i := slices.IndexFunc(listed, func(s client.ListedSandbox) bool { return s.SandboxID == running }); err != nil || i < 0 || listed[i].State != "lost" {
		t.Errorf("list through the gateway: %v %+v, want the Lost running sandbox %s with state lost", err, listed, running)
	}
	if err := g.Lifecycle.Pause(ctx, running); (client.StatusCode(err) != http.StatusBadGateway && client.StatusCode(err) != http.StatusServiceUnavailable) || !strings.Contains(err.Error(), "Lost") {
		t.Errorf("pause a Lost sandbox: %v, want 502 or 503 saying it is Lost", err)
	}

	began := time.Now()
	status, body := f.post(ctx, gw, "/sandboxes/"+paused.SandboxID+"/connect", `{"timeout":300}`)
	took := time.Since(began)
	if status/100 != 2 {
		t.Fatalf("connect to the Lost sandbox: %d %s", status, body)
	}
	var sb client.Sandbox
	if err := json.Unmarshal([]byte(body), &sb); err != nil || sb.SandboxID != paused.SandboxID {
		t.Errorf("connect answered %s (%v), want the sandbox", body, err)
	}
	t.Logf("connect on a Lost sandbox to running on node %s: %s", rep.Node, took.Round(time.Millisecond))
	res, err := g.Commands.ExecWait(ctx, paused.SandboxID, client.ExecRequest{Command: "cat /tmp/mark"})
	if err != nil || res.Stdout != "kept\n" {
		t.Errorf("the restored sandbox's file: %+v %v, want kept", res, err)
	}
	waitFor(t, 30*time.Second, "the restored sandbox's object Running on the replica's node", func() bool {
		o, _ := f.object(ctx, paused.SandboxID)
		return o.Status.Phase == warrenv1.SandboxRunning && o.Status.Node == rep.Node && o.Spec.NodeName == rep.Node
	})

	if status, body := f.post(ctx, gw, "/sandboxes/"+gv.SandboxID+"/connect", `{"timeout":300}`); status/100 != 2 {
		t.Fatalf("connect to the Lost hibernated gVisor sandbox: %d %s", status, body)
	}
	if res, err := g.Commands.ExecWait(ctx, gv.SandboxID, client.ExecRequest{Command: "cat /tmp/mark"}); err != nil || res.Stdout != "kept\n" {
		t.Errorf("the restored gVisor sandbox's file: %+v %v, want kept", res, err)
	}
	// Its memory came with the copy: the same process counts on from
	// where it was (a fresh one would start again at 1).
	if now := counterOf(t, ctx, g, gv.SandboxID); now < last {
		t.Errorf("the restored gVisor sandbox's counter is %d, it was %d before its node was lost", now, last)
	}
	if procs, err := g.Processes.List(ctx, gv.SandboxID); err != nil || !hasRunning(procs, ticker.PID) {
		t.Errorf("the restored gVisor sandbox: its ticker (pid %d) is not running: %+v %v", ticker.PID, procs, err)
	}
	if d, err := g.Sandboxes.Get(ctx, gv.SandboxID); err != nil || d.Metadata["warren.dev/moved-with"] != "memory" {
		t.Errorf("the restored gVisor sandbox: %+v %v, want it moved with its memory", d, err)
	}
	if d, err := g.Sandboxes.Get(ctx, gv.SandboxID); err != nil || d.Runtime != "gvisor" {
		t.Errorf("the restored gVisor sandbox: %+v %v, want gvisor", d, err)
	}
	waitFor(t, 30*time.Second, "the restored gVisor sandbox's object on the replica's node", func() bool {
		o, _ := f.object(ctx, gv.SandboxID)
		return o.Status.Node == gvRep.Node && o.Status.Phase == warrenv1.SandboxRunning
	})

	status, body = f.post(ctx, gw, "/sandboxes/"+running+"/connect", `{"timeout":300}`)
	if status != http.StatusConflict || !strings.Contains(body, "no other node holds a copy") || !strings.Contains(body, home) {
		t.Errorf("connect to a Lost sandbox without a copy: %d %s, want 409 naming node %s and that no copy exists", status, body, home)
	}

	lost.d.start()
	waitFor(t, time.Minute, "the returned node's own sandbox back and its stale copy gone", func() bool {
		b, _ := f.object(ctx, running)
		st, _ := f.nodeGet(ctx, lost, "/sandboxes/"+paused.SandboxID)
		return b.Status.Phase == warrenv1.SandboxRunning && b.Status.Node == home && st == http.StatusNotFound
	})
	if o, _ := f.object(ctx, paused.SandboxID); o.Status.Node != rep.Node || o.Status.Phase != warrenv1.SandboxRunning {
		t.Errorf("after the node came back the restored sandbox's object is %s on %s, want Running on %s", o.Status.Phase, o.Status.Node, rep.Node)
	}
	list, _, err := g.Sandboxes.List(ctx, client.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, s := range list {
		if s.SandboxID == paused.SandboxID {
			seen++
		}
	}
	if seen != 1 {
		t.Errorf("the fleet lists the restored sandbox %d times, want once", seen)
	}
	if res, err := g.Commands.ExecWait(ctx, paused.SandboxID, client.ExecRequest{Command: "cat /tmp/mark"}); err != nil || res.Stdout != "kept\n" {
		t.Errorf("the restored sandbox after its old node came back: %+v %v", res, err)
	}
}

// createOn creates a sandbox on node: the other nodes are drained while it
// is placed.
func (f *fleetT) createOn(ctx context.Context, g *client.Client, node string, in client.NewSandbox) client.Sandbox {
	f.t.Helper()
	drain := func(name string, on bool) {
		// A patch: the node writes its WarrenNode's status meanwhile.
		wn := &warrenv1.WarrenNode{ObjectMeta: metav1.ObjectMeta{Name: name}}
		patch := fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, on)
		if err := f.env.Client.Patch(ctx, wn, ctrlclient.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			f.t.Fatal(err)
		}
	}
	// Deferred calls run last first: the nodes are undrained, then the
	// gateways' caches are given time to see it.
	defer time.Sleep(time.Second)
	for _, m := range f.nodes {
		if m.name != node {
			drain(m.name, true)
			defer drain(m.name, false)
		}
	}
	time.Sleep(time.Second) // the watch's delivery to the gateways' caches
	sb, err := g.Sandboxes.Create(ctx, in)
	if err != nil {
		f.t.Fatal(err)
	}
	if got := f.sandboxNode(ctx, sb.SandboxID); got != node {
		f.t.Fatalf("sandbox %s landed on node %s with every other node drained, want %s", sb.SandboxID, got, node)
	}
	return sb
}

// nodeGet sends a GET with the fleet's admin key straight to a node.
func (f *fleetT) nodeGet(ctx context.Context, m *fleetMember, path string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+m.d.addr+path, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("X-API-Key", f.adminKey(ctx))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	res.Body.Close()
	return res.StatusCode, nil
}
