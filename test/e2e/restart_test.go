package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/warrenhq/warren/client"
)

// initPID reads the host pid of a sandbox's PID 1 from the runtime's state.
func initPID(t *testing.T, dataDir, id string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dataDir, "runtime", "native", id, "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		InitProcessPid int `json:"init_process_pid"`
	}
	if err := json.Unmarshal(b, &st); err != nil || st.InitProcessPid <= 0 {
		t.Fatalf("state.json of %s: pid %d, %v", id, st.InitProcessPid, err)
	}
	return st.InitProcessPid
}

// TestRestartReconciles kills the daemon, changes the world behind its back
// (a sandbox dies, orphaned parts appear), and checks what the restarted
// daemon makes of it: live sandboxes reattached, dead ones failed with a
// reason, orphans removed.
func TestRestartReconciles(t *testing.T) {
	t.Parallel()
	d := busyboxDaemon(t)
	ctx := ctxT(t, 3*time.Minute)
	c := d.client()
	live, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb"})
	if err != nil {
		t.Fatal(err)
	}
	dead, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb"})
	if err != nil {
		t.Fatal(err)
	}
	d.mustCLI("exec", live.SandboxID, "--", "sh", "-c", "echo kept > /workspace/state")

	d.stop(syscall.SIGKILL)
	// The sandbox dies while the daemon is away.
	if err := syscall.Kill(initPID(t, d.dataDir, dead.SandboxID), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Orphans: a root volume and a socket directory that no record names.
	orphanVol := filepath.Join(d.dataDir, "pool", "volumes", "sandboxes", "orphan1")
	if out, err := exec.Command("btrfs", "subvolume", "create", orphanVol).CombinedOutput(); err != nil {
		t.Fatalf("make orphan subvolume: %v %s", err, out)
	}
	orphanRun := filepath.Join(d.dataDir, "run", "orphan1")
	if err := os.MkdirAll(orphanRun, 0o700); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)

	d.start()
	c = d.client()
	det, err := c.Sandboxes.Get(ctx, live.SandboxID)
	if err != nil || det.State != "running" {
		t.Fatalf("live sandbox after restart: %+v %v", det, err)
	}
	if got := d.mustCLI("exec", live.SandboxID, "--", "cat", "/workspace/state"); got != "kept\n" {
		t.Fatalf("live sandbox's files after restart: %q", got)
	}
	det, err = c.Sandboxes.Get(ctx, dead.SandboxID)
	if err != nil || det.State != "failed" || det.Reason == "" {
		t.Fatalf("dead sandbox after restart: %+v %v", det, err)
	}
	if left := leftovers(t, d.dataDir, dead.SandboxID); len(left) > 0 {
		t.Fatalf("a dead sandbox's parts were kept:\n%s", strings.Join(left, "\n"))
	}
	for _, p := range []string{orphanVol, orphanRun} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("orphan %s still there (%v)", p, err)
		}
	}
	if err := c.Sandboxes.Delete(ctx, dead.SandboxID); err != nil {
		t.Fatalf("delete a failed sandbox: %v", err)
	}

	// A sandbox that dies while the daemon runs is noticed too.
	if err := syscall.Kill(initPID(t, d.dataDir, live.SandboxID), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		det, err = c.Sandboxes.Get(ctx, live.SandboxID)
		if err == nil && det.State == "failed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a sandbox whose PID 1 died is still %+v %v", det, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, err := c.Commands.ExecWait(ctx, live.SandboxID, client.ExecRequest{Cmd: []string{"true"}}); client.StatusCode(err) != 409 {
		t.Fatalf("exec in a failed sandbox: %v", err)
	}
	// The watch marks it failed first and frees its parts after, so the
	// parts may still be there a moment (under load, seconds).
	deadline = time.Now().Add(20 * time.Second)
	for left := leftovers(t, d.dataDir, live.SandboxID); len(left) > 0; left = leftovers(t, d.dataDir, live.SandboxID) {
		if time.Now().After(deadline) {
			t.Fatalf("a dead sandbox's parts were kept:\n%s", strings.Join(left, "\n"))
		}
		time.Sleep(200 * time.Millisecond)
	}
}
