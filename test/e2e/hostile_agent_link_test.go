package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/client"
)

// TestHostileSandboxCutsAgentLink: the sandbox's root takes copies of its
// agent's sockets (pidfd_getfd) and shuts them down, cutting the agent's
// link to the daemon. The daemon must not hang or crash: the sandbox comes
// back (the agent re-dials) or is failed with a reason and leaks nothing,
// and a neighbour keeps working throughout.
func TestHostileSandboxCutsAgentLink(t *testing.T) {
	t.Parallel()
	d, ctx, id := busyboxSandbox(t, 3*time.Minute)
	c := d.client()
	neighbour, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb"})
	if err != nil {
		t.Fatal(err)
	}

	// The attacker: a static binary, built here and put into the sandbox.
	bin := filepath.Join(t.TempDir(), "cutlink")
	build := exec.Command("go", "build", "-o", bin, "./testdata/cutlink")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build cutlink: %v\n%s", err, out)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Files.Write(ctx, id, "/tmp/cutlink", bytes.NewReader(data), 0o755, "root"); err != nil {
		t.Fatal(err)
	}
	// Detached, so that its answer does not ride the link it cuts; a second
	// later, so that the answer is out first even on a loaded machine.
	if _, err := c.Commands.ExecWait(ctx, id, client.ExecRequest{Command: "(sleep 1; /tmp/cutlink > /tmp/cutlink.out 2>&1) &", User: "root", TimeoutMs: 20000}); err != nil {
		t.Fatal(err)
	}

	// The neighbour answers before, while and after the victim's link is
	// cut (at about 1 s).
	for range 25 {
		if res, err := c.Commands.ExecWait(ctx, neighbour.SandboxID, sh("echo ok")); err != nil || res.Stdout != "ok\n" {
			t.Fatalf("neighbour while the link is cut: %+v %v", res, err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// Then the sandbox answers again, or it is failed with a reason.
	deadline := time.Now().Add(45 * time.Second)
	for {
		res, err := c.Commands.ExecWait(ctx, id, client.ExecRequest{Command: "cat /tmp/cutlink.out", User: "root", TimeoutMs: 5000})
		if err == nil && strings.HasPrefix(res.Stdout, "cut ") || err == nil && strings.HasPrefix(res.Stdout, "refused") {
			t.Logf("the sandbox answers after the attack; the attacker said %q", strings.TrimSpace(res.Stdout))
			break
		}
		det, gerr := c.Sandboxes.Get(ctx, id)
		if gerr != nil {
			t.Fatalf("get sandbox after its link was cut: %v", gerr)
		}
		if det.State == "failed" {
			if det.Reason == "" {
				t.Error("failed without a reason")
			}
			t.Logf("the sandbox was failed: %s", det.Reason)
			waitNoLeftovers(t, ctx, d, id)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("45 s after its link was cut the sandbox is %s and exec says %+v %v", det.State, res, err)
		}
		time.Sleep(300 * time.Millisecond)
	}
	if res, err := c.Commands.ExecWait(ctx, neighbour.SandboxID, sh("echo ok")); err != nil || res.Stdout != "ok\n" {
		t.Errorf("neighbour after the attack: %+v %v", res, err)
	}
	if _, err := c.Meta.Health(ctx); err != nil {
		t.Errorf("health after the attack: %v", err)
	}
}
