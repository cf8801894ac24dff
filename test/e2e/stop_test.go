package e2e

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/warrenhq/warren/client"
)

// TestStop: a graceful stop lets a process that handles SIGTERM exit, and
// escalates to SIGKILL for one that ignores it; a stopped sandbox keeps its
// filesystem across a daemon restart until it is deleted.
func TestStop(t *testing.T) {
	t.Parallel()
	d := busyboxDaemon(t)
	c := d.client()
	ctx := ctxT(t, 2*time.Minute)

	polite, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Processes.Start(ctx, polite.SandboxID, client.StartProcessRequest{
		ExecRequest: client.ExecRequest{Command: "trap 'exit 0' TERM; while :; do sleep 0.1; done"}}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	det, err := c.Lifecycle.Stop(ctx, polite.SandboxID, 5*time.Second, false)
	if err != nil || det.State != "stopped" {
		t.Fatalf("graceful stop: %+v %v", det, err)
	}
	if took := time.Since(start); took > 4*time.Second {
		t.Errorf("a process that handles SIGTERM took %v to stop", took)
	}

	stubborn, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Commands.ExecWait(ctx, stubborn.SandboxID, client.ExecRequest{Command: "echo kept > /workspace/f"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Processes.Start(ctx, stubborn.SandboxID, client.StartProcessRequest{
		ExecRequest: client.ExecRequest{Command: "trap '' TERM; while :; do sleep 0.1; done"}}); err != nil {
		t.Fatal(err)
	}
	// Let the shell install its trap before the stop's SIGTERM arrives.
	time.Sleep(500 * time.Millisecond)
	start = time.Now()
	if _, err := c.Lifecycle.Stop(ctx, stubborn.SandboxID, 1500*time.Millisecond, false); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < time.Second {
		t.Errorf("a process that ignores SIGTERM was not given its grace: %v", took)
	}
	evs, _ := c.Sandboxes.Events(ctx, stubborn.SandboxID, 0)
	if last := evs[len(evs)-1]; last.Kind != "stopped" || !strings.Contains(last.Detail, "killed after") {
		t.Errorf("stop event: %+v", last)
	}
	if _, err := c.Commands.ExecWait(ctx, stubborn.SandboxID, client.ExecRequest{Cmd: []string{"true"}}); client.StatusCode(err) != 409 {
		t.Fatalf("exec in a stopped sandbox: %v", err)
	}
	if _, err := c.Lifecycle.Stop(ctx, stubborn.SandboxID, 0, true); client.StatusCode(err) != 409 {
		t.Fatalf("stop twice: %v", err)
	}

	// Drain: new calls are refused while a running command finishes, then
	// the sandbox stops.
	drained, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb"})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan client.ExecResult, 1)
	go func() {
		res, _ := c.Commands.ExecWait(ctx, drained.SandboxID, client.ExecRequest{Command: "sleep 1.5; echo finished"})
		done <- res
	}()
	time.Sleep(300 * time.Millisecond)
	stopped := make(chan error, 1)
	go func() {
		_, err := c.Lifecycle.Drain(ctx, drained.SandboxID, 10*time.Second, time.Second)
		stopped <- err
	}()
	time.Sleep(300 * time.Millisecond)
	if _, err := c.Commands.ExecWait(ctx, drained.SandboxID, client.ExecRequest{Cmd: []string{"true"}}); client.StatusCode(err) != 409 || !strings.Contains(err.Error(), "draining") {
		t.Fatalf("a new exec while draining: %v", err)
	}
	if res := <-done; res.Stdout != "finished\n" {
		t.Fatalf("the running command was cut by the drain: %+v", res)
	}
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if det, _ := c.Sandboxes.Get(ctx, drained.SandboxID); det.State != "stopped" {
		t.Fatalf("after drain: %s", det.State)
	}
	if err := c.Sandboxes.Delete(ctx, drained.SandboxID); err != nil {
		t.Fatal(err)
	}

	// A restart keeps the stopped sandbox's filesystem.
	d.stop(syscall.SIGKILL)
	d.start()
	c = d.client()
	if det, err := c.Sandboxes.Get(ctx, stubborn.SandboxID); err != nil || det.State != "stopped" {
		t.Fatalf("after restart: %+v %v", det, err)
	}
	vol := d.dataDir + "/pool/volumes/sandboxes/" + stubborn.SandboxID + "/workspace/f"
	if _, err := os.ReadFile(vol); err != nil {
		t.Fatalf("the stopped sandbox's files are gone after a restart: %v", err)
	}
	for _, id := range []string{polite.SandboxID, stubborn.SandboxID} {
		if err := c.Sandboxes.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
		if left := leftovers(t, d.dataDir, id); len(left) > 0 {
			t.Fatalf("left behind:\n%s", strings.Join(left, "\n"))
		}
	}
}
