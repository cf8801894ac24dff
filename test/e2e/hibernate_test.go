package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/store"
)

// E2B's pause {memory: true} (the SDK's keepMemory) on a gvisor sandbox
// hibernates it: its processes end, their memory on disk; E2B's connect
// restores it and a process's in-memory counter carries on from where it
// was rather than starting again.
func TestGVisorPauseWithMemory(t *testing.T) {
	t.Parallel()
	d := gvisorDaemon(t)
	ctx := ctxT(t, 2*time.Minute)
	c := d.client()
	sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", Runtime: "gvisor"})
	if err != nil {
		t.Fatal(err)
	}
	id := sb.SandboxID
	ticker, err := c.Processes.Start(ctx, id, client.StartProcessRequest{Tag: "ticker", ExecRequest: sh(tickerScript)})
	if err != nil {
		t.Fatal(err)
	}
	before := counterPast(t, ctx, c, id, 5)

	if code, body := d.postAPI(ctx, "/sandboxes/"+id+"/pause", `{"memory":true}`); code != http.StatusNoContent {
		t.Fatalf("E2B pause {memory: true}: %d %s; want 204", code, body)
	}
	det, err := c.Sandboxes.Get(ctx, id)
	if err != nil || det.State != "hibernated" {
		t.Fatalf("after pause {memory: true}: %+v, %v; want hibernated", det, err)
	}
	if left := gvisorProcesses(t, id); len(left) > 0 {
		t.Errorf("a hibernated sandbox still has processes:\n%s", strings.Join(left, "\n"))
	}
	if _, err := c.Commands.ExecWait(ctx, id, sh("true")); client.StatusCode(err) != http.StatusConflict {
		t.Errorf("exec in a hibernated sandbox: %v, want 409", err)
	}
	if code, body := d.postAPI(ctx, "/sandboxes/"+id+"/pause", `{"memory":true}`); code != http.StatusConflict {
		t.Errorf("pause {memory: true} of a hibernated sandbox: %d %s; want 409", code, body)
	}

	if code, body := d.postAPI(ctx, "/sandboxes/"+id+"/connect", `{"timeout":120}`); code != http.StatusCreated {
		t.Fatalf("E2B connect to the hibernated sandbox: %d %s; want 201 (resumed)", code, body)
	}
	woke := counterOf(t, ctx, c, id)
	if woke < before {
		t.Errorf("after resume the counter is %d; it was %d before the pause (a fresh process would start at 1)", woke, before)
	}
	counterPast(t, ctx, c, id, woke)
	if procs, err := c.Processes.List(ctx, id); err != nil || !hasRunning(procs, ticker.PID) {
		t.Errorf("the ticker (pid %d) is not running after resume: %+v, %v", ticker.PID, procs, err)
	}
	ev, err := c.Sandboxes.Events(ctx, id, 0)
	if err != nil || !hasEvent(ev, "hibernated") || !hasEvent(ev, "resumed") {
		t.Errorf("events: %+v, %v; want hibernated and resumed", ev, err)
	}
	if err := c.Sandboxes.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	if left := append(gvisorLeftovers(t, d.dataDir, id), memoryImages(d.dataDir, id)...); len(left) > 0 {
		t.Errorf("deleted sandbox left:\n%s", strings.Join(left, "\n"))
	}
}

// memoryImages lists the memory images in the data directory that name id.
func memoryImages(dataDir, id string) []string {
	var found []string
	entries, _ := os.ReadDir(filepath.Join(dataDir, "memory"))
	for _, e := range entries {
		if strings.Contains(e.Name(), id) {
			found = append(found, "memory image: "+e.Name())
		}
	}
	return found
}

// --paused-retention applies to hibernated sandboxes: one hibernated
// before a daemon restart and one hibernated after it are both killed once
// hibernated that long (events: retention-expired and destroyed, cause
// timeout), their images removed; a running sandbox is left alone.
func TestGVisorHibernatedRetention(t *testing.T) {
	t.Parallel()
	d := gvisorDaemon(t, "--paused-retention", "5s")
	ctx := ctxT(t, 3*time.Minute)
	c := d.client()
	create := func() string {
		t.Helper()
		sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", Runtime: "gvisor"})
		if err != nil {
			t.Fatal(err)
		}
		return sb.SandboxID
	}
	hibernate := func(id string) {
		t.Helper()
		if code, body := d.postAPI(ctx, "/sandboxes/"+id+"/pause", `{"memory":true}`); code != http.StatusNoContent {
			t.Fatalf("pause {memory: true} of %s: %d %s", id, code, body)
		}
	}
	early, late, running := create(), create(), create()
	hibernate(early)
	d.stop(syscall.SIGKILL)
	d.start()
	c = d.client()
	hibernate(late)

	gone := func(id string) bool {
		det, err := c.Sandboxes.Get(ctx, id)
		if client.StatusCode(err) == http.StatusNotFound {
			return true
		}
		if err != nil {
			t.Fatal(err)
		}
		if det.State != "hibernated" {
			t.Fatalf("sandbox %s is %s while it waits for its retention; want hibernated", id, det.State)
		}
		return false
	}
	deadline := time.Now().Add(time.Minute)
	for !gone(early) || !gone(late) {
		if time.Now().After(deadline) {
			t.Fatal("hibernated sandboxes outlived --paused-retention by a minute")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if det, err := c.Sandboxes.Get(ctx, running); err != nil || det.State != "running" {
		t.Errorf("a running sandbox: %+v, %v; the retention of paused ones must not touch it", det, err)
	}
	for _, id := range []string{early, late} {
		if left := append(gvisorLeftovers(t, d.dataDir, id), memoryImages(d.dataDir, id)...); len(left) > 0 {
			t.Errorf("sandbox %s, killed at its retention, left:\n%s", id, strings.Join(left, "\n"))
		}
	}

	// The API forgets a destroyed sandbox; its events stay in the
	// database, read here with the daemon stopped.
	d.stop(syscall.SIGTERM)
	st, err := store.Open(ctx, filepath.Join(d.dataDir, "warren.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// early was hibernated when the daemon restarted, late was running.
	want := map[string]string{
		early: "created/api hibernated/api reattached/restart retention-expired/timeout destroyed/timeout",
		late:  "created/api reattached/restart hibernated/api retention-expired/timeout destroyed/timeout",
	}
	for id, w := range want {
		evs, err := st.ListEvents(ctx, id, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		var kinds []string
		for _, e := range evs {
			kinds = append(kinds, e.Kind+"/"+e.Cause)
		}
		if got := strings.Join(kinds, " "); got != w {
			t.Errorf("events of %s:\n got %s\nwant %s", id, got, w)
		}
	}
}
