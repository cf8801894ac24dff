package e2e

import (
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/warrenhq/warren/client"
)

// TestPauseResume freezes a sandbox with a counter loop running: the counter
// stops while paused and goes on from where it was after resume; calls that
// need the sandbox get 409 while it is paused; pausing twice is 409; the
// run timeout does not tick while paused; it survives a daemon restart.
func TestPauseResume(t *testing.T) {
	d := newDaemon(t)
	d.start()
	d.mustCLI("template", "build", "bb", "--busybox", "--data-dir", d.dataDir)
	c := d.client()
	ctx := ctxT(t, 2*time.Minute)
	timeout := int64(30)
	sb, err := c.CreateSandbox(ctx, client.NewSandbox{TemplateID: "bb", Timeout: &timeout})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.StartProcess(ctx, sb.SandboxID, client.StartProcessRequest{
		ExecRequest: client.ExecRequest{Command: "i=0; while :; do i=$((i+1)); echo $i > /tmp/count.tmp; mv /tmp/count.tmp /tmp/count; sleep 0.02; done"},
		Tag:         "counter",
	}); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		t.Helper()
		res, err := c.ExecWait(ctx, sb.SandboxID, client.ExecRequest{Cmd: []string{"cat", "/tmp/count"}})
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(strings.TrimSpace(res.Stdout))
		return n
	}
	time.Sleep(300 * time.Millisecond)
	before, _ := c.GetSandbox(ctx, sb.SandboxID)

	d.mustCLI("sandbox", "pause", sb.SandboxID)
	if det, _ := c.GetSandbox(ctx, sb.SandboxID); det.State != "paused" {
		t.Fatalf("state after pause: %s", det.State)
	}
	if err := c.PauseSandbox(ctx, sb.SandboxID); client.StatusCode(err) != 409 {
		t.Fatalf("pause twice: %v", err)
	}
	if _, err := c.ExecWait(ctx, sb.SandboxID, client.ExecRequest{Cmd: []string{"true"}}); client.StatusCode(err) != 409 || !strings.Contains(err.Error(), "paused") {
		t.Fatalf("exec while paused: %v", err)
	}
	if _, err := c.ReadFile(ctx, sb.SandboxID, "/tmp/count"); client.StatusCode(err) != 409 {
		t.Fatalf("file read while paused: %v", err)
	}
	time.Sleep(1500 * time.Millisecond)

	// A daemon restart keeps it paused.
	d.stop(syscall.SIGKILL)
	d.start()
	c = d.client()
	if det, err := c.GetSandbox(ctx, sb.SandboxID); err != nil || det.State != "paused" {
		t.Fatalf("after a restart: %+v %v", det, err)
	}

	d.mustCLI("sandbox", "resume", sb.SandboxID)
	n1 := count()
	time.Sleep(300 * time.Millisecond)
	n2 := count()
	if n2 <= n1 {
		t.Fatalf("the counter did not go on after resume: %d then %d", n1, n2)
	}
	// The counter was frozen: ~2 s paused would be ~100 ticks of 20 ms.
	if n1 > 60 {
		t.Errorf("the counter ran while paused: %d after ~0.3 s of running", n1)
	}
	after, _ := c.GetSandbox(ctx, sb.SandboxID)
	if before.EndAt == nil || after.EndAt == nil || !after.EndAt.After(before.EndAt.Add(time.Second)) {
		t.Errorf("the run timeout ticked while paused: end %v before, %v after", before.EndAt, after.EndAt)
	}
	// The history says what happened, when and why.
	evs, err := c.SandboxEvents(ctx, sb.SandboxID, 0)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range evs {
		kinds = append(kinds, e.Kind+"/"+e.Cause)
	}
	if got := strings.Join(kinds, " "); got != "created/api paused/api reattached/restart resumed/api" {
		t.Errorf("events: %s", got)
	}
	if out := d.mustCLI("sandbox", "events", sb.SandboxID); !strings.Contains(out, "paused") || !strings.Contains(out, "running → paused") {
		t.Errorf("warren sandbox events:\n%s", out)
	}
	if det, _ := c.GetSandbox(ctx, sb.SandboxID); len(det.Events) != 4 {
		t.Errorf("GET /sandboxes/{id} events: %+v", det.Events)
	}
	// Resuming a running sandbox changes nothing; /timeout moves the end.
	if _, err := c.ResumeSandbox(ctx, sb.SandboxID); err != nil {
		t.Fatal(err)
	}
	d.mustCLI("sandbox", "timeout", sb.SandboxID, "2")
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := c.GetSandbox(ctx, sb.SandboxID); client.StatusCode(err) == 404 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the sandbox outlived its 2 s timeout by 8 s")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := c.PauseSandbox(ctx, sb.SandboxID); client.StatusCode(err) != 404 {
		t.Fatalf("pause of a killed sandbox: %v", err)
	}
	if err := c.SetTimeout(ctx, "nosuchsandbox", 10); client.StatusCode(err) != 404 {
		t.Fatalf("timeout of an unknown sandbox: %v", err)
	}
}
