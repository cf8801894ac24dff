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
	t.Parallel()
	d := busyboxDaemon(t)
	c := d.client()
	ctx := ctxT(t, 2*time.Minute)
	timeout := int64(30)
	sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", Timeout: &timeout})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Processes.Start(ctx, sb.SandboxID, client.StartProcessRequest{
		ExecRequest: client.ExecRequest{Command: "i=0; while :; do i=$((i+1)); echo $i > /tmp/count.tmp; mv /tmp/count.tmp /tmp/count; sleep 0.02; done"},
		Tag:         "counter",
	}); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		t.Helper()
		res, err := c.Commands.ExecWait(ctx, sb.SandboxID, client.ExecRequest{Cmd: []string{"cat", "/tmp/count"}})
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(strings.TrimSpace(res.Stdout))
		return n
	}
	time.Sleep(300 * time.Millisecond)
	before, _ := c.Sandboxes.Get(ctx, sb.SandboxID)

	d.mustCLI("sandbox", "pause", sb.SandboxID)
	if det, _ := c.Sandboxes.Get(ctx, sb.SandboxID); det.State != "paused" {
		t.Fatalf("state after pause: %s", det.State)
	}
	if err := c.Lifecycle.Pause(ctx, sb.SandboxID); client.StatusCode(err) != 409 {
		t.Fatalf("pause twice: %v", err)
	}
	if _, err := c.Commands.ExecWait(ctx, sb.SandboxID, client.ExecRequest{Cmd: []string{"true"}}); client.StatusCode(err) != 409 || !strings.Contains(err.Error(), "paused") {
		t.Fatalf("exec while paused: %v", err)
	}
	if _, err := c.Files.Read(ctx, sb.SandboxID, "/tmp/count"); client.StatusCode(err) != 409 {
		t.Fatalf("file read while paused: %v", err)
	}
	time.Sleep(1500 * time.Millisecond)

	// A daemon restart keeps it paused.
	d.stop(syscall.SIGKILL)
	d.start()
	c = d.client()
	if det, err := c.Sandboxes.Get(ctx, sb.SandboxID); err != nil || det.State != "paused" {
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
	after, _ := c.Sandboxes.Get(ctx, sb.SandboxID)
	if before.EndAt == nil || after.EndAt == nil || !after.EndAt.After(before.EndAt.Add(time.Second)) {
		t.Errorf("the run timeout ticked while paused: end %v before, %v after", before.EndAt, after.EndAt)
	}
	// The history says what happened, when and why.
	evs, err := c.Sandboxes.Events(ctx, sb.SandboxID, 0)
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
	if det, _ := c.Sandboxes.Get(ctx, sb.SandboxID); len(det.Events) != 4 {
		t.Errorf("GET /sandboxes/{id} events: %+v", det.Events)
	}
	// Resuming a running sandbox changes nothing; /timeout moves the end.
	if _, err := c.Lifecycle.Resume(ctx, sb.SandboxID); err != nil {
		t.Fatal(err)
	}
	d.mustCLI("sandbox", "timeout", sb.SandboxID, "2")
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := c.Sandboxes.Get(ctx, sb.SandboxID); client.StatusCode(err) == 404 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the sandbox outlived its 2 s timeout by 8 s")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := c.Lifecycle.Pause(ctx, sb.SandboxID); client.StatusCode(err) != 404 {
		t.Fatalf("pause of a killed sandbox: %v", err)
	}
	if err := c.Lifecycle.SetTimeout(ctx, "nosuchsandbox", 10); client.StatusCode(err) != 404 {
		t.Fatalf("timeout of an unknown sandbox: %v", err)
	}
}

// TestRunTimeout: a sandbox with a 3 s run timeout is alive before its end
// and gone soon after; POST /timeout postpones the kill past the old end.
// The windows are wide (the host is shared): the test checks the order of
// events around the end, not the precision of the clock.
func TestRunTimeout(t *testing.T) {
	t.Parallel()
	d := busyboxDaemon(t)
	c := d.client()
	ctx := ctxT(t, 2*time.Minute)
	three := int64(3)
	short, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", Timeout: &three})
	if err != nil {
		t.Fatal(err)
	}
	extended, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", Timeout: &three})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Sandboxes.Delete(ctxT(t, time.Minute), extended.SandboxID) })
	det := func(id string) client.SandboxDetail {
		t.Helper()
		det, err := c.Sandboxes.Get(ctx, id)
		if err != nil || det.EndAt == nil {
			t.Fatalf("sandbox %s: %+v %v", id, det, err)
		}
		return det
	}
	end := func(id string) time.Time { return *det(id).EndAt }
	shortEnd, oldEnd := end(short.SandboxID), end(extended.SandboxID)
	if got := shortEnd.Sub(det(short.SandboxID).StartedAt); got < 2*time.Second || got > 4*time.Second {
		t.Errorf("a 3 s timeout ends %v after the start", got)
	}
	if err := c.Lifecycle.SetTimeout(ctx, extended.SandboxID, 10); err != nil {
		t.Fatal(err)
	}
	if newEnd := end(extended.SandboxID); !newEnd.After(oldEnd.Add(5 * time.Second)) {
		t.Fatalf("POST /timeout 10 moved the end from %v to %v", oldEnd, newEnd)
	}
	// gone says whether the sandbox disappears within a few seconds.
	gone := func(id string) bool {
		t.Helper()
		for range 50 {
			if _, err := c.Sandboxes.Get(ctx, id); client.StatusCode(err) == 404 {
				return true
			}
			time.Sleep(100 * time.Millisecond)
		}
		return false
	}
	alive := func(id string) bool {
		t.Helper()
		res, err := c.Commands.ExecWait(ctx, id, client.ExecRequest{Cmd: []string{"echo", "up"}})
		if client.StatusCode(err) == 404 {
			return false
		}
		// The kill can land while the probe's command runs: the command
		// then fails with the agent's connection cut, and the sandbox is
		// gone right after.
		if err != nil && gone(id) {
			return false
		}
		if err != nil || res.Stdout != "up\n" {
			t.Fatalf("exec in %s: %+v %v", id, res, err)
		}
		return true
	}
	// About a second before its end (~2 s in) the short one still runs.
	if wait := time.Until(shortEnd.Add(-time.Second)); wait > 0 {
		time.Sleep(wait)
	}
	if time.Now().Before(shortEnd) && !alive(short.SandboxID) {
		t.Fatalf("the sandbox was killed before its end %v", shortEnd)
	}
	// Gone soon after its end (the timer checks every second; ~5 s in).
	waitFor(t, 15*time.Second, "the 3 s sandbox to be killed", func() bool { return !alive(short.SandboxID) })
	t.Logf("killed %v after its end", time.Since(shortEnd).Round(10*time.Millisecond))

	// The extended one outlives its old end by far.
	time.Sleep(time.Until(oldEnd.Add(3 * time.Second)))
	if !alive(extended.SandboxID) {
		t.Fatalf("the sandbox was killed at its old end %v despite POST /timeout", oldEnd)
	}
	waitFor(t, 25*time.Second, "the extended sandbox to be killed at its new end", func() bool { return !alive(extended.SandboxID) })
	// Counted once each kill is done, a moment after the sandbox reads as
	// gone.
	want := `warren_timeouts_fired_total{action="kill",timeout="run"} 2`
	waitFor(t, 10*time.Second, "both run timeouts in /metrics ("+want+")", func() bool {
		return strings.Contains(httpGet(t, d, "/metrics", d.key, 200), want)
	})
}

// A command the run timeout cuts short says so: 404 (the sandbox is gone)
// with the reason, waiting or streaming, not the agent connection's error.
func TestExecCutByTimeout(t *testing.T) {
	t.Parallel()
	d := busyboxDaemon(t)
	c := d.client()
	ctx := ctxT(t, time.Minute)
	two := int64(2)
	for _, streaming := range []bool{false, true} {
		sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", Timeout: &two})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Sandboxes.Delete(ctxT(t, time.Minute), sb.SandboxID) })
		req := client.ExecRequest{Cmd: []string{"sleep", "60"}}
		if streaming {
			_, err = c.Commands.Exec(ctx, sb.SandboxID, req, nil, nil)
		} else {
			_, err = c.Commands.ExecWait(ctx, sb.SandboxID, req)
			if code := client.StatusCode(err); code != 404 {
				t.Errorf("waiting exec cut by the timeout: status %d (%v), want 404", code, err)
			}
		}
		if err == nil || !strings.Contains(err.Error(), "was killed while the command ran (its timeout ran out)") {
			t.Errorf("streaming %v: exec cut by the timeout: %v, want the reason", streaming, err)
		}
	}
}
