package e2e

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/warrenhq/warren/client"
)

// tickerScript counts in a shell variable — state that lives only in the
// process's memory — and writes each value to /workspace/counter.
const tickerScript = `i=0; while :; do i=$((i+1)); echo $i > /workspace/counter.tmp; mv /workspace/counter.tmp /workspace/counter; sleep 0.05; done`

// counterOf reads a sandbox's counter through the API.
func counterOf(t *testing.T, ctx context.Context, c *client.Client, id string) int {
	t.Helper()
	res, err := c.ExecWait(ctx, id, sh("cat /workspace/counter"))
	if err != nil {
		t.Fatalf("sandbox %s: read counter: %v", id, err)
	}
	n, _ := strconv.Atoi(strings.TrimSpace(res.Stdout))
	return n
}

// counterPast waits until a sandbox's counter passes n and returns it.
func counterPast(t *testing.T, ctx context.Context, c *client.Client, id string, n int) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if v := counterOf(t, ctx, c, id); v > n {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox %s: counter stuck at or below %d", id, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Memory snapshots on gvisor: a process holding its state in memory is
// snapshotted with memory; three forks of it each carry on counting from
// there with files of their own; the parent is hibernated, survives a
// kill -9 of the daemon, and resumes counting on; a rollback to the
// snapshot brings the counter back to it. Native sandboxes refuse memory
// snapshots and hibernation with 400. Nothing is left behind.
func TestGVisorMemorySnapshots(t *testing.T) {
	d := gvisorDaemon(t)
	ctx := ctxT(t, 5*time.Minute)
	c := d.client()
	sb, err := c.CreateSandbox(ctx, client.NewSandbox{TemplateID: "bb", Runtime: "gvisor"})
	if err != nil {
		t.Fatal(err)
	}
	id := sb.SandboxID
	if det, err := c.GetSandbox(ctx, id); err != nil || !det.MemorySnapshot {
		t.Fatalf("a gvisor sandbox should say it can save memory: %+v, %v", det, err)
	}
	ticker, err := c.StartProcess(ctx, id, client.StartProcessRequest{Tag: "ticker", ExecRequest: sh(tickerScript)})
	if err != nil {
		t.Fatal(err)
	}
	counterPast(t, ctx, c, id, 5)

	snap, err := c.CreateSnapshot(ctx, id, client.NewSnapshot{Name: "warm", Memory: true})
	if err != nil {
		t.Fatal(err)
	}
	atSnap := counterOf(t, ctx, c, id)
	t.Logf("memory snapshot: %d bytes of memory image, frozen %.1f ms, counter ~%d", snap.MemoryBytes, snap.FrozenMs, atSnap)
	if snap.MemoryBytes <= 0 {
		t.Fatalf("snapshot with memory: %+v", snap)
	}
	if got, err := c.GetSnapshot(ctx, snap.SnapshotID); err != nil || got.MemoryBytes != snap.MemoryBytes {
		t.Errorf("GetSnapshot = %+v, %v", got, err)
	}
	counterPast(t, ctx, c, id, atSnap+5) // the parent goes on

	// Three forks with memory: each counts on from the snapshot, alone.
	forks, err := c.Fork(ctx, id, client.ForkRequest{SnapshotID: snap.SnapshotID, Count: 3})
	if err != nil {
		t.Fatal(err)
	}
	var forkIDs []string
	for i, f := range forks {
		if f.Sandbox == nil {
			t.Fatalf("fork %d: %+v", i, f.Error)
		}
		forkIDs = append(forkIDs, f.Sandbox.SandboxID)
	}
	for i, fid := range forkIDs {
		first := counterOf(t, ctx, c, fid)
		if first < atSnap-2 {
			t.Errorf("fork %d started counting at %d; the snapshot was at about %d (a fresh process would start at 1)", i, first, atSnap)
		}
		counterPast(t, ctx, c, fid, first+3)
		procs, err := c.ListProcesses(ctx, fid)
		if err != nil || !hasRunning(procs, ticker.PID) {
			t.Errorf("fork %d: the ticker (pid %d) is not running: %+v, %v", i, ticker.PID, procs, err)
		}
		if _, err := c.ExecWait(ctx, fid, sh("echo "+strconv.Itoa(i)+" > /workspace/mine")); err != nil {
			t.Fatal(err)
		}
	}
	for i, fid := range forkIDs {
		res, err := c.ExecWait(ctx, fid, sh("cat /workspace/mine"))
		if err != nil || strings.TrimSpace(res.Stdout) != strconv.Itoa(i) {
			t.Errorf("fork %d sees /workspace/mine = %+v, %v; its files must be its own", i, res, err)
		}
	}
	if res, err := c.ExecWait(ctx, id, sh("test -e /workspace/mine && echo shared || echo own")); err != nil || res.Stdout != "own\n" {
		t.Errorf("the parent sees a fork's file: %+v, %v", res, err)
	}

	// Hibernate the parent: no processes, calls refused, restart survived.
	if out := d.mustCLI("sandbox", "hibernate", id); out != "" && !strings.Contains(out, id) {
		t.Logf("hibernate printed %q", out)
	}
	det, err := c.GetSandbox(ctx, id)
	if err != nil || det.State != "hibernated" {
		t.Fatalf("after hibernate: %+v, %v", det, err)
	}
	if _, err := c.ExecWait(ctx, id, sh("true")); client.StatusCode(err) != http.StatusConflict {
		t.Errorf("exec in a hibernated sandbox: %v, want 409", err)
	}
	if left := gvisorProcesses(t, id); len(left) > 0 {
		t.Errorf("a hibernated sandbox still has processes:\n%s", strings.Join(left, "\n"))
	}
	if list, _, err := c.ListSandboxes(ctx, client.ListOptions{States: []string{"paused"}}); err != nil || !listed(list, id) {
		t.Errorf("E2B's paused filter should list the hibernated sandbox: %+v, %v", list, err)
	}
	d.stop(syscall.SIGKILL)
	d.start()
	c = d.client()
	if det, err := c.GetSandbox(ctx, id); err != nil || det.State != "hibernated" {
		t.Fatalf("after a daemon kill: %+v, %v", det, err)
	}
	if _, err := c.ResumeSandbox(ctx, id); err != nil {
		t.Fatal(err)
	}
	woke := counterOf(t, ctx, c, id)
	if woke < atSnap+5 {
		t.Errorf("after resume the counter is %d; it was past %d before hibernating", woke, atSnap+5)
	}
	counterPast(t, ctx, c, id, woke)
	ev, err := c.SandboxEvents(ctx, id, 0)
	if err != nil || !hasEvent(ev, "hibernated") || !hasEvent(ev, "resumed") {
		t.Errorf("events: %+v, %v", ev, err)
	}

	// Rollback to the memory snapshot: the counter goes back to it.
	rb, err := c.Rollback(ctx, id, client.RollbackRequest{SnapshotID: snap.SnapshotID, Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if !rb.ProcessesRestored || rb.ProcessesRestarted {
		t.Errorf("rollback to a memory snapshot: %+v", rb)
	}
	if back := counterOf(t, ctx, c, id); back > woke || back < atSnap-2 {
		t.Errorf("after rollback the counter is %d; want it back near %d (it was %d)", back, atSnap, woke)
	}

	// A fork of the files only starts fresh: no ticker.
	plain, err := c.Fork(ctx, id, client.ForkRequest{SnapshotID: snap.SnapshotID, FilesOnly: true})
	if err != nil || len(plain) != 1 || plain[0].Sandbox == nil {
		t.Fatalf("files-only fork: %+v, %v", plain, err)
	}
	pid := plain[0].Sandbox.SandboxID
	if procs, err := c.ListProcesses(ctx, pid); err != nil || hasRunning(procs, ticker.PID) {
		t.Errorf("a files-only fork runs the parent's ticker: %+v, %v", procs, err)
	}

	// Delete everything: no images, processes or state left.
	for _, sid := range append(forkIDs, pid, id) {
		if err := c.DeleteSandbox(ctx, sid); err != nil {
			t.Fatal(err)
		}
		if left := gvisorLeftovers(t, d.dataDir, sid); len(left) > 0 {
			t.Errorf("deleted sandbox %s left:\n%s", sid, strings.Join(left, "\n"))
		}
	}
	if err := c.DeleteSnapshot(ctx, snap.SnapshotID); err != nil {
		t.Fatal(err)
	}
	// A deleted snapshot's volume and image go in the background.
	deadline := time.Now().Add(20 * time.Second)
	for {
		entries, _ := os.ReadDir(filepath.Join(d.dataDir, "memory"))
		if len(entries) == 0 {
			break
		}
		if time.Now().After(deadline) {
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			t.Errorf("memory images left: %v", names)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// The native runtime cannot save memory: asking is a 400 that says so, and
// the sandbox carries on.
func TestNativeRefusesMemory(t *testing.T) {
	d, ctx, id := busyboxSandbox(t, 2*time.Minute)
	c := d.client()
	if det, err := c.GetSandbox(ctx, id); err != nil || det.MemorySnapshot {
		t.Fatalf("a native sandbox says it can save memory: %+v, %v", det, err)
	}
	_, err := c.CreateSnapshot(ctx, id, client.NewSnapshot{Memory: true})
	if client.StatusCode(err) != http.StatusBadRequest || !strings.Contains(err.Error(), "gvisor") {
		t.Errorf("memory snapshot of a native sandbox: %v, want 400 naming gvisor", err)
	}
	if _, err := c.HibernateSandbox(ctx, id); client.StatusCode(err) != http.StatusBadRequest || !strings.Contains(err.Error(), "gvisor") {
		t.Errorf("hibernate a native sandbox: %v, want 400 naming gvisor", err)
	}
	if _, stderr, code := d.cli("", "sandbox", "hibernate", id); code == 0 || !strings.Contains(stderr, "gvisor") {
		t.Errorf("CLI hibernate of a native sandbox: exit %d, %q", code, stderr)
	}
	if _, err := c.Fork(ctx, id, client.ForkRequest{Memory: true}); client.StatusCode(err) != http.StatusBadRequest {
		t.Errorf("fork with memory of a native sandbox: %v, want 400", err)
	}
	// E2B's pause {memory: true} (keepMemory) freezes it: memory kept in RAM.
	req, _ := http.NewRequestWithContext(ctx, "POST", "http://"+d.addr+"/sandboxes/"+id+"/pause", strings.NewReader(`{"memory":true}`))
	req.Header.Set("X-API-Key", d.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if det, err := c.GetSandbox(ctx, id); resp.StatusCode != http.StatusNoContent || err != nil || det.State != "paused" {
		t.Errorf("E2B pause {memory: true} of a native sandbox: %d, then %+v, %v; want 204 and paused", resp.StatusCode, det.State, err)
	}
	if _, err := c.ResumeSandbox(ctx, id); err != nil {
		t.Fatal(err)
	}
	if res, err := c.ExecWait(ctx, id, sh("echo still")); err != nil || res.Stdout != "still\n" {
		t.Errorf("after the refusals: %+v, %v", res, err)
	}
	if snaps, _, err := c.ListSnapshots(ctx, client.SnapshotListOptions{SandboxID: id}); err != nil || len(snaps) != 0 {
		t.Errorf("refused snapshots left records: %+v, %v", snaps, err)
	}
}

// gvisorProcesses lists host processes whose command line names id.
func gvisorProcesses(t *testing.T, id string) []string {
	t.Helper()
	var found []string
	for _, l := range gvisorLeftovers(t, "/nonexistent", id) {
		if strings.HasPrefix(l, "process: ") {
			found = append(found, l)
		}
	}
	return found
}

func listed(list []client.ListedSandbox, id string) bool {
	for _, s := range list {
		if s.SandboxID == id {
			return true
		}
	}
	return false
}

func hasEvent(ev []client.SandboxEvent, kind string) bool {
	for _, e := range ev {
		if e.Kind == kind {
			return true
		}
	}
	return false
}
