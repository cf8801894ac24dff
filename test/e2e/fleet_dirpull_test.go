package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/warrenhq/warren/client"
)

// TestFleetDirSnapshotPull has node B of a two-node fleet on dir storage
// pull two turns from node A: the second, whose parent B then holds, comes
// whole (dir storage has no deltas, and A would refuse one with 501), and
// a sandbox made from it on B has A's files.
func TestFleetDirSnapshotPull(t *testing.T) {
	f, ctx := startKeyedFleet(t, "--storage", "dir")
	a, b := f.nodes[0].d, f.nodes[1].d
	ca, cb := a.client(), b.client()
	sb, err := ca.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb"})
	if err != nil {
		t.Fatal(err)
	}
	t1 := turnAfter(t, ctx, ca, sb.SandboxID, turnCmd(1))
	t2 := turnAfter(t, ctx, ca, sb.SandboxID, turnCmd(2))
	want := rootOK(t, ctx, ca, sb.SandboxID, manifestCmd)
	if _, err := ca.Snapshots.Export(ctx, t2, t1); client.StatusCode(err) != 501 {
		t.Fatalf("export against a base on dir storage: %v, want 501", err)
	}
	for _, id := range []string{t1, t2} {
		code, body := b.postAPI(ctx, "/snapshots/pull", fmt.Sprintf(`{"from":"http://%s","snapshot":%q,"team":"admin"}`, a.addr, id))
		if code != 201 {
			t.Fatalf("pull %s to a dir node holding its parent: %d %s", id, code, body)
		}
	}
	got, err := cb.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: t2})
	if err != nil {
		t.Fatal(err)
	}
	if m := rootOK(t, ctx, cb, got.SandboxID, manifestCmd); m != want {
		t.Errorf("files of the pulled turn on B differ from A's:\n%s\nwant\n%s", m, want)
	}
}

// startKeyedFleet starts a fleet of two nodes (with nodeArgs) whose node A
// accepts the fleet's admin key, as pulls need; the context ends after 10
// minutes.
func startKeyedFleet(t *testing.T, nodeArgs ...string) (*fleetT, context.Context) {
	t.Helper()
	f := startFleet(t, 2, 0, nodeArgs...)
	ctx := ctxT(t, 10*time.Minute)
	fleetKey := f.adminKey(ctx)
	waitFor(t, 30*time.Second, "node A to accept the fleet's key", func() bool {
		_, _, err := client.New("http://"+f.nodes[0].d.addr, fleetKey).Snapshots.List(ctx, client.SnapshotListOptions{})
		return err == nil
	})
	return f, ctx
}

// rootOK runs cmd in sandbox id as root, which must succeed; its stdout.
func rootOK(t *testing.T, ctx context.Context, c *client.Client, id, cmd string) string {
	t.Helper()
	res := execAs(t, ctx, c, id, "root", cmd)
	if res.ExitCode != 0 {
		t.Fatalf("%.60s: %+v", cmd, res)
	}
	return res.Stdout
}

// turnAfter runs cmd in sandbox id as root, then ends a turn: its snapshot.
func turnAfter(t *testing.T, ctx context.Context, c *client.Client, id, cmd string) string {
	t.Helper()
	rootOK(t, ctx, c, id, cmd)
	res, err := c.Commands.ExecWait(ctx, id, client.ExecRequest{Cmd: []string{"true"}, Turn: true})
	if err != nil || res.SnapshotID == "" {
		t.Fatalf("turn: %v %+v", err, res)
	}
	return res.SnapshotID
}
