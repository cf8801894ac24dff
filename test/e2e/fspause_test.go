package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/client"
)

// TestPauseFilesOnly: on a real native sandbox, pause {memory: false} ends
// every process of the sandbox on the host and keeps its files; it shows as
// paused; a call with autoResume is refused with a clear error; a connect
// boots it cold (a new boot id) with the files kept. connect {memory: false}
// on a frozen sandbox boots it cold too, and an auto-pause created with
// autoPauseMemory false pauses without memory.
func TestPauseFilesOnly(t *testing.T) {
	t.Parallel()
	d := busyboxDaemon(t)
	c := d.client()
	ctx := ctxT(t, 3*time.Minute)
	sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", AutoResume: &client.AutoResume{Enabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	id := sb.SandboxID
	t.Cleanup(func() { c.Sandboxes.Delete(context.Background(), id) })
	execAs(t, ctx, c, id, "user", "echo kept > /workspace/f; (sleep 1000 &)")
	before := bootID(t, ctx, c, id)
	if n := hostProcsOf(t, id); n == 0 {
		t.Fatal("found no host process of the running sandbox: the check below would prove nothing")
	}
	if err := c.Lifecycle.PauseFiles(ctx, id); err != nil {
		t.Fatal(err)
	}
	if n := hostProcsOf(t, id); n != 0 {
		t.Fatalf("%d host process(es) of the sandbox after a filesystem-only pause", n)
	}
	if det, err := c.Sandboxes.Get(ctx, id); err != nil || det.State != "paused" {
		t.Fatalf("after a filesystem-only pause: %+v %v", det, err)
	}
	_, err = c.Commands.ExecWait(ctx, id, client.ExecRequest{Command: "true"})
	if err == nil || !strings.Contains(err.Error(), "paused without its memory") {
		t.Fatalf("a call with autoResume after a filesystem-only pause: %v, want a refusal", err)
	}
	if _, err := c.Lifecycle.Resume(ctx, id); err != nil {
		t.Fatal(err)
	}
	after := bootID(t, ctx, c, id)
	if after == before || !bootIDRE.MatchString(after) {
		t.Fatalf("boot id after the cold boot %q, before %q: want a new one", after, before)
	}
	if got := execAs(t, ctx, c, id, "user", "cat /workspace/f; pgrep sleep || echo none").Stdout; got != "kept\nnone\n" {
		t.Fatalf("after the cold boot: %q, want the file kept and no old process", got)
	}

	// connect {memory: false} on a memory-paused (frozen) sandbox.
	if err := c.Lifecycle.Pause(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Lifecycle.Reboot(ctx, id); err != nil {
		t.Fatal(err)
	}
	if got := bootID(t, ctx, c, id); got == after {
		t.Fatalf("connect {memory: false} of a frozen sandbox kept boot id %q", got)
	}

	// autoPauseMemory false: with autoResume it is refused; alone the
	// timeout pauses without memory.
	no, two := false, int64(2)
	_, err = c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", AutoPause: true, AutoPauseMemory: &no, AutoResume: &client.AutoResume{Enabled: true}})
	if err == nil || !strings.Contains(err.Error(), "autoResume") {
		t.Fatalf("autoPauseMemory false with autoResume: %v, want a 400", err)
	}
	auto, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", Timeout: &two, AutoPause: true, AutoPauseMemory: &no})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Sandboxes.Delete(context.Background(), auto.SandboxID) })
	autoBoot := bootID(t, ctx, c, auto.SandboxID)
	waitState(t, ctx, c, auto.SandboxID, "paused", 15*time.Second)
	if n := hostProcsOf(t, auto.SandboxID); n != 0 {
		t.Fatalf("%d host process(es) after an auto-pause without memory", n)
	}
	if _, err := c.Lifecycle.Resume(ctx, auto.SandboxID); err != nil {
		t.Fatal(err)
	}
	if got := bootID(t, ctx, c, auto.SandboxID); got == autoBoot {
		t.Fatalf("connect after an auto-pause without memory kept boot id %q", got)
	}
}

// waitState waits until sandbox id shows state.
func waitState(t *testing.T, ctx context.Context, c *client.Client, id, state string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		det, err := c.Sandboxes.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if det.State == state {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox %s is %s after %s, want %s", id, det.State, within, state)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// hostProcsOf counts the host's processes in a cgroup of sandbox id.
func hostProcsOf(t *testing.T, id string) int {
	t.Helper()
	files, _ := filepath.Glob("/proc/[0-9]*/cgroup")
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err == nil && strings.Contains(string(b), id) {
			n++
		}
	}
	return n
}
