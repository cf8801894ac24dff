package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/kube/fleet"
)

// TestFleetKubectlDrain: a cordon of a warren node's Kubernetes Node keeps
// new sandboxes off it but moves nothing; annotated warren.dev/drain=true,
// the cordoned node's paused sandbox and its running one (stopped first)
// move to the other node with their files and the WarrenNode says Drained; after the uncordon the conditions are
// gone and a sandbox moved back stays.
func TestFleetKubectlDrain(t *testing.T) {
	t.Parallel()
	f := startFleet(t, 2, 1)
	ctx := ctxT(t, 5*time.Minute)
	g := f.client(ctx, 0)

	sb, err := g.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb"})
	if err != nil {
		t.Fatal(err)
	}
	id := sb.SandboxID
	if _, err := g.Commands.ExecWait(ctx, id, client.ExecRequest{Command: "echo drained > /tmp/mark && sync"}); err != nil {
		t.Fatal(err)
	}
	if err := g.Lifecycle.Pause(ctx, id); err != nil {
		t.Fatal(err)
	}
	x := f.sandboxNode(ctx, id)
	other := f.nodes[0].name
	if other == x {
		other = f.nodes[1].name
	}
	// A running sandbox on x too: the drain stops it first (native).
	run, err := g.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Commands.ExecWait(ctx, run.SandboxID, client.ExecRequest{Command: "echo running > /tmp/mark && sync"}); err != nil {
		t.Fatal(err)
	}
	if f.sandboxNode(ctx, run.SandboxID) != x {
		if st, body := f.move(ctx, run.SandboxID, "?stop=true", `{"node":"`+x+`"}`); st != http.StatusOK {
			t.Fatalf("move the running sandbox to %s: %d %s", x, st, body)
		}
		if _, err := g.Lifecycle.Resume(ctx, run.SandboxID); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 30*time.Second, "the running sandbox's object Running on "+x, func() bool {
		return f.sandboxNode(ctx, run.SandboxID) == x && f.sandboxPhase(ctx, run.SandboxID) == "Running"
	})

	// kubectl cordon: no new sandboxes on x, the one there stays.
	f.patchNode(ctx, x, `{"spec":{"unschedulable":true}}`)
	waitFor(t, 30*time.Second, "WarrenNode "+x+" Cordoned", func() bool {
		c := f.warrenNodeCondition(ctx, x, fleet.NodeCordoned)
		return c != nil && c.Status == metav1.ConditionTrue
	})
	t.Logf("cordoned: %s", f.warrenNodeCondition(ctx, x, fleet.NodeCordoned).Message)
	for range 3 {
		fresh, err := g.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb"})
		if err != nil {
			t.Fatal(err)
		}
		if n := f.sandboxNode(ctx, fresh.SandboxID); n != other {
			t.Errorf("a create while %s is cordoned landed on %s", x, n)
		}
		if err := g.Sandboxes.Delete(ctx, fresh.SandboxID); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.sandboxNode(ctx, id); n != x {
		t.Fatalf("a cordon without the drain annotation moved the sandbox to %s", n)
	}
	if c := f.warrenNodeCondition(ctx, x, fleet.NodeDrained); c != nil {
		t.Errorf("a cordon alone says %s=%s: %s", c.Type, c.Status, c.Message)
	}

	// kubectl annotate node x warren.dev/drain=true: the drain.
	began := time.Now()
	f.patchNode(ctx, x, `{"metadata":{"annotations":{"`+fleet.DrainAnnotation+`":"true"}}}`)
	var drained *metav1.Condition
	waitFor(t, time.Minute, "WarrenNode "+x+" Drained", func() bool {
		drained = f.warrenNodeCondition(ctx, x, fleet.NodeDrained)
		return drained != nil && drained.Status == metav1.ConditionTrue
	})
	t.Logf("drained %s in %s: %s", x, time.Since(began).Round(time.Millisecond), drained.Message)
	if want := "2 of 2 sandboxes moved (1 stopped first, 0 hibernated first), 0 failed"; !strings.Contains(drained.Message, want) {
		t.Errorf("Drained's message %q lacks %q", drained.Message, want)
	}
	for sb, mark := range map[string]string{id: "drained\n", run.SandboxID: "running\n"} {
		waitFor(t, 30*time.Second, "the Sandbox object of "+sb+" on "+other, func() bool { return f.sandboxNode(ctx, sb) == other })
		if _, err := g.Lifecycle.Resume(ctx, sb); err != nil {
			t.Fatalf("resume the drained sandbox %s: %v", sb, err)
		}
		if res, err := g.Commands.ExecWait(ctx, sb, client.ExecRequest{Command: "cat /tmp/mark"}); err != nil || res.Stdout != mark {
			t.Errorf("the drained sandbox %s's file: %+v %v", sb, res, err)
		}
	}
	// The controller's own status write looks at the node again: nothing
	// is moved twice (with two nodes a second move would fail).
	time.Sleep(2 * time.Second)
	if c := f.warrenNodeCondition(ctx, x, fleet.NodeDrained); c == nil || c.Status != metav1.ConditionTrue || c.Message != drained.Message {
		t.Errorf("Drained changed after the drain: %+v", c)
	}

	// kubectl uncordon: the conditions go, and nothing moves any more.
	f.patchNode(ctx, x, `{"spec":{"unschedulable":null}}`)
	waitFor(t, 30*time.Second, "WarrenNode "+x+" without Cordoned and Drained", func() bool {
		return f.warrenNodeCondition(ctx, x, fleet.NodeCordoned) == nil && f.warrenNodeCondition(ctx, x, fleet.NodeDrained) == nil
	})
	if err := g.Lifecycle.Pause(ctx, id); err != nil {
		t.Fatal(err)
	}
	if st, body := f.move(ctx, id, "", `{"node":"`+x+`"}`); st != http.StatusOK {
		t.Fatalf("move the sandbox back to %s: %d %s", x, st, body)
	}
	waitFor(t, 30*time.Second, "the Sandbox object back on "+x, func() bool { return f.sandboxNode(ctx, id) == x })
	time.Sleep(3 * time.Second) // a drain would have started by now
	if n := f.sandboxNode(ctx, id); n != x {
		t.Errorf("after the uncordon the sandbox moved to %s", n)
	}
}
