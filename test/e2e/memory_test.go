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
	res, err := c.Commands.ExecWait(ctx, id, sh("cat /workspace/counter"))
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
	t.Parallel()
	d := gvisorDaemon(t)
	ctx := ctxT(t, 5*time.Minute)
	c := d.client()
	sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", Runtime: "gvisor"})
	if err != nil {
		t.Fatal(err)
	}
	id := sb.SandboxID
	if det, err := c.Sandboxes.Get(ctx, id); err != nil || !det.MemorySnapshot {
		t.Fatalf("a gvisor sandbox should say it can save memory: %+v, %v", det, err)
	}
	ticker, err := c.Processes.Start(ctx, id, client.StartProcessRequest{Tag: "ticker", ExecRequest: sh(tickerScript)})
	if err != nil {
		t.Fatal(err)
	}
	counterPast(t, ctx, c, id, 5)

	snap, err := c.Snapshots.Create(ctx, id, client.NewSnapshot{Name: "warm", Memory: true})
	if err != nil {
		t.Fatal(err)
	}
	atSnap := counterOf(t, ctx, c, id)
	t.Logf("memory snapshot: %d bytes of memory image, frozen %.1f ms, counter ~%d", snap.MemoryBytes, snap.FrozenMs, atSnap)
	if snap.MemoryBytes <= 0 {
		t.Fatalf("snapshot with memory: %+v", snap)
	}
	if got, err := c.Snapshots.Get(ctx, snap.SnapshotID); err != nil || got.MemoryBytes != snap.MemoryBytes {
		t.Errorf("GetSnapshot = %+v, %v", got, err)
	}
	counterPast(t, ctx, c, id, atSnap+5) // the parent goes on

	// Three forks with memory: each counts on from the snapshot, alone.
	forks, err := c.Snapshots.Fork(ctx, id, client.ForkRequest{SnapshotID: snap.SnapshotID, Count: 3})
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
		procs, err := c.Processes.List(ctx, fid)
		if err != nil || !hasRunning(procs, ticker.PID) {
			t.Errorf("fork %d: the ticker (pid %d) is not running: %+v, %v", i, ticker.PID, procs, err)
		}
		if _, err := c.Commands.ExecWait(ctx, fid, sh("echo "+strconv.Itoa(i)+" > /workspace/mine")); err != nil {
			t.Fatal(err)
		}
	}
	for i, fid := range forkIDs {
		res, err := c.Commands.ExecWait(ctx, fid, sh("cat /workspace/mine"))
		if err != nil || strings.TrimSpace(res.Stdout) != strconv.Itoa(i) {
			t.Errorf("fork %d sees /workspace/mine = %+v, %v; its files must be its own", i, res, err)
		}
	}
	if res, err := c.Commands.ExecWait(ctx, id, sh("test -e /workspace/mine && echo shared || echo own")); err != nil || res.Stdout != "own\n" {
		t.Errorf("the parent sees a fork's file: %+v, %v", res, err)
	}

	// A native sandbox of the same family cannot restore gvisor's memory:
	// a rollback to the snapshot is refused before anything is touched,
	// and with filesOnly it takes the files and restarts the processes.
	native, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: snap.SnapshotID, Runtime: "native", FilesOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Commands.ExecWait(ctx, native.SandboxID, sh("echo later > /workspace/native")); err != nil {
		t.Fatal(err)
	}
	_, err = c.Snapshots.Rollback(ctx, native.SandboxID, client.RollbackRequest{SnapshotID: snap.SnapshotID})
	if client.StatusCode(err) != http.StatusBadRequest || !strings.Contains(err.Error(), "filesOnly") {
		t.Errorf("rollback of a native sandbox to a gvisor memory snapshot: %v, want 400 naming filesOnly", err)
	}
	if res, err := c.Commands.ExecWait(ctx, native.SandboxID, sh("cat /workspace/native")); err != nil || res.Stdout != "later\n" {
		t.Errorf("after the refused rollback the native sandbox gives %+v, %v; want it untouched", res, err)
	}
	if rb, err := c.Snapshots.Rollback(ctx, native.SandboxID, client.RollbackRequest{SnapshotID: snap.SnapshotID, FilesOnly: true}); err != nil || !rb.ProcessesRestarted || rb.ProcessesRestored {
		t.Errorf("files-only rollback: %+v, %v; want the processes restarted", rb, err)
	}
	if res, err := c.Commands.ExecWait(ctx, native.SandboxID, sh("test -e /workspace/native && echo kept || echo gone")); err != nil || res.Stdout != "gone\n" {
		t.Errorf("after the files-only rollback: %+v, %v; want the snapshot's files", res, err)
	}
	if err := c.Sandboxes.Delete(ctx, native.SandboxID); err != nil {
		t.Fatal(err)
	}

	// Hibernate the parent (paused first: a paused sandbox hibernates
	// too): no processes, calls refused, restart survived.
	if err := c.Lifecycle.Pause(ctx, id); err != nil {
		t.Fatal(err)
	}
	d.mustCLI("sandbox", "hibernate", id)
	det, err := c.Sandboxes.Get(ctx, id)
	if err != nil || det.State != "hibernated" {
		t.Fatalf("after hibernate: %+v, %v", det, err)
	}
	if _, err := c.Commands.ExecWait(ctx, id, sh("true")); client.StatusCode(err) != http.StatusConflict {
		t.Errorf("exec in a hibernated sandbox: %v, want 409", err)
	}
	if left := gvisorProcesses(t, id); len(left) > 0 {
		t.Errorf("a hibernated sandbox still has processes:\n%s", strings.Join(left, "\n"))
	}
	if list, _, err := c.Sandboxes.List(ctx, client.ListOptions{States: []string{"paused"}}); err != nil || !listed(list, id) {
		t.Errorf("E2B's paused filter should list the hibernated sandbox: %+v, %v", list, err)
	}
	d.stop(syscall.SIGKILL)
	d.start()
	c = d.client()
	if det, err := c.Sandboxes.Get(ctx, id); err != nil || det.State != "hibernated" {
		t.Fatalf("after a daemon kill: %+v, %v", det, err)
	}
	if _, err := c.Lifecycle.Resume(ctx, id); err != nil {
		t.Fatal(err)
	}
	woke := counterOf(t, ctx, c, id)
	if woke < atSnap+5 {
		t.Errorf("after resume the counter is %d; it was past %d before hibernating", woke, atSnap+5)
	}
	counterPast(t, ctx, c, id, woke)
	ev, err := c.Sandboxes.Events(ctx, id, 0)
	if err != nil || !hasEvent(ev, "hibernated") || !hasEvent(ev, "resumed") {
		t.Errorf("events: %+v, %v", ev, err)
	}

	// Rollback to the memory snapshot: the counter goes back to it.
	rb, err := c.Snapshots.Rollback(ctx, id, client.RollbackRequest{SnapshotID: snap.SnapshotID, Force: true})
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
	plain, err := c.Snapshots.Fork(ctx, id, client.ForkRequest{SnapshotID: snap.SnapshotID, FilesOnly: true})
	if err != nil || len(plain) != 1 || plain[0].Sandbox == nil {
		t.Fatalf("files-only fork: %+v, %v", plain, err)
	}
	pid := plain[0].Sandbox.SandboxID
	if procs, err := c.Processes.List(ctx, pid); err != nil || hasRunning(procs, ticker.PID) {
		t.Errorf("a files-only fork runs the parent's ticker: %+v, %v", procs, err)
	}

	// Delete everything: no images, processes or state left.
	for _, sid := range append(forkIDs, pid, id) {
		if err := c.Sandboxes.Delete(ctx, sid); err != nil {
			t.Fatal(err)
		}
		if left := gvisorLeftovers(t, d.dataDir, sid); len(left) > 0 {
			t.Errorf("deleted sandbox %s left:\n%s", sid, strings.Join(left, "\n"))
		}
	}
	if err := c.Snapshots.Delete(ctx, snap.SnapshotID); err != nil {
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
	t.Parallel()
	d, ctx, id := busyboxSandbox(t, 2*time.Minute)
	c := d.client()
	if det, err := c.Sandboxes.Get(ctx, id); err != nil || det.MemorySnapshot {
		t.Fatalf("a native sandbox says it can save memory: %+v, %v", det, err)
	}
	_, err := c.Snapshots.Create(ctx, id, client.NewSnapshot{Memory: true})
	if client.StatusCode(err) != http.StatusBadRequest || !strings.Contains(err.Error(), "gvisor") {
		t.Errorf("memory snapshot of a native sandbox: %v, want 400 naming gvisor", err)
	}
	if _, err := c.Lifecycle.Hibernate(ctx, id); client.StatusCode(err) != http.StatusBadRequest || !strings.Contains(err.Error(), "gvisor") {
		t.Errorf("hibernate a native sandbox: %v, want 400 naming gvisor", err)
	}
	if _, stderr, code := d.cli("", "sandbox", "hibernate", id); code == 0 || !strings.Contains(stderr, "gvisor") {
		t.Errorf("CLI hibernate of a native sandbox: exit %d, %q", code, stderr)
	}
	if _, err := c.Snapshots.Fork(ctx, id, client.ForkRequest{Memory: true}); client.StatusCode(err) != http.StatusBadRequest {
		t.Errorf("fork with memory of a native sandbox: %v, want 400", err)
	}
	// E2B's pause {memory: true} (keepMemory) freezes it: memory kept in RAM.
	code, _ := d.postAPI(ctx, "/sandboxes/"+id+"/pause", `{"memory":true}`)
	if det, err := c.Sandboxes.Get(ctx, id); code != http.StatusNoContent || err != nil || det.State != "paused" {
		t.Errorf("E2B pause {memory: true} of a native sandbox: %d, then %+v, %v; want 204 and paused", code, det.State, err)
	}
	if _, err := c.Lifecycle.Resume(ctx, id); err != nil {
		t.Fatal(err)
	}
	if res, err := c.Commands.ExecWait(ctx, id, sh("echo still")); err != nil || res.Stdout != "still\n" {
		t.Errorf("after the refusals: %+v, %v", res, err)
	}
	// Not even tombstones: the refusals come before anything is recorded.
	if snaps, _, err := c.Snapshots.List(ctx, client.SnapshotListOptions{SandboxID: id, States: []string{"ready", "deleted"}}); err != nil || len(snaps) != 0 {
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

// The issue's own case, with the real base template: a Python process
// holding a counter in memory; the sandbox is hibernated, the daemon killed
// and restarted, and the counter goes on after resume; three forks with
// memory go on counting, each on its own.
func TestGVisorPythonCounter(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the base template by debootstrap (minutes): not in -short mode")
	}
	d := gvisorDaemon(t)
	d.mustCLI("template", "build", "base", "--debootstrap", "bookworm", "--data-dir", d.dataDir)
	ctx := ctxT(t, 5*time.Minute)
	c := d.client()
	sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "base", Runtime: "gvisor"})
	if err != nil {
		t.Fatal(err)
	}
	id := sb.SandboxID
	const counter = `import os, time
n = 0
while True:
    n += 1
    with open("/workspace/counter.tmp", "w") as f:
        f.write(str(n))
    os.replace("/workspace/counter.tmp", "/workspace/counter")
    time.sleep(0.05)
`
	if _, err := c.Processes.Start(ctx, id, client.StartProcessRequest{Tag: "counter", ExecRequest: client.ExecRequest{Cmd: []string{"python3", "-c", counter}}}); err != nil {
		t.Fatal(err)
	}
	before := counterPast(t, ctx, c, id, 5)

	if _, err := c.Lifecycle.Hibernate(ctx, id); err != nil {
		t.Fatal(err)
	}
	d.stop(syscall.SIGKILL)
	d.start()
	c = d.client()
	if det, err := c.Sandboxes.Get(ctx, id); err != nil || det.State != "hibernated" {
		t.Fatalf("after a daemon kill: %+v, %v", det, err)
	}
	if _, err := c.Lifecycle.Resume(ctx, id); err != nil {
		t.Fatal(err)
	}
	woke := counterOf(t, ctx, c, id)
	if woke < before {
		t.Fatalf("after hibernation, a restart and resume the counter is %d; it was %d (a fresh Python would restart at 1)", woke, before)
	}
	counterPast(t, ctx, c, id, woke)

	forks, err := c.Snapshots.Fork(ctx, id, client.ForkRequest{Memory: true, Count: 3})
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range forks {
		if f.Sandbox == nil {
			t.Fatalf("fork %d: %+v", i, f.Error)
		}
		fid := f.Sandbox.SandboxID
		first := counterOf(t, ctx, c, fid)
		if first < woke {
			t.Errorf("fork %d counts from %d; its parent was past %d", i, first, woke)
		}
		counterPast(t, ctx, c, fid, first+3)
		if _, err := c.Commands.ExecWait(ctx, fid, client.ExecRequest{Command: "echo " + strconv.Itoa(i) + " > /workspace/mine"}); err != nil {
			t.Fatal(err)
		}
	}
	for i, f := range forks {
		res, err := c.Commands.ExecWait(ctx, f.Sandbox.SandboxID, client.ExecRequest{Command: "cat /workspace/mine"})
		if err != nil || strings.TrimSpace(res.Stdout) != strconv.Itoa(i) {
			t.Errorf("fork %d: /workspace/mine = %+v, %v", i, res, err)
		}
	}
}

// --idle-action hibernate: an idle gvisor sandbox is hibernated (a native
// one, which cannot be, is paused); a call to a hibernated sandbox with
// autoResume wakes it with its processes.
func TestIdleHibernate(t *testing.T) {
	t.Parallel()
	d := gvisorDaemon(t, "--idle-timeout", "2s", "--idle-action", "hibernate")
	c := d.client()
	ctx := ctxT(t, 2*time.Minute)
	g, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", Runtime: "gvisor", AutoResume: &client.AutoResume{Enabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	n, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", Runtime: "native"})
	if err != nil {
		t.Fatal(err)
	}
	// A process that keeps its count in memory and writes it only when
	// asked (so that it does not look busy).
	if _, err := c.Processes.Start(ctx, g.SandboxID, client.StartProcessRequest{Tag: "mem", ExecRequest: sh(
		`i=0; while :; do i=$((i+1)); if [ -e /workspace/ask ]; then rm /workspace/ask; echo $i > /workspace/answer; fi; sleep 0.05; done >/dev/null 2>&1`)}); err != nil {
		t.Fatal(err)
	}
	ask := func() int {
		t.Helper()
		res, err := c.Commands.ExecWait(ctx, g.SandboxID, sh("rm -f /workspace/answer; touch /workspace/ask; while [ ! -s /workspace/answer ]; do sleep 0.05; done; cat /workspace/answer"))
		if err != nil {
			t.Fatal(err)
		}
		v, _ := strconv.Atoi(strings.TrimSpace(res.Stdout))
		return v
	}
	first := ask()
	state := func(id string) string {
		det, err := c.Sandboxes.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return det.State
	}
	deadline := time.Now().Add(20 * time.Second)
	for state(g.SandboxID) != "hibernated" || state(n.SandboxID) != "paused" {
		if time.Now().After(deadline) {
			t.Fatalf("after the idle timeout: gvisor %s (want hibernated), native %s (want paused)", state(g.SandboxID), state(n.SandboxID))
		}
		time.Sleep(200 * time.Millisecond)
	}
	// autoResume: the exec wakes it, and the process counted on from
	// where it was.
	if again := ask(); again <= first {
		t.Errorf("after an auto-resume from hibernation the count is %d, before %d", again, first)
	}
	if st := state(g.SandboxID); st != "running" {
		t.Errorf("after a call with autoResume: %s", st)
	}
	ev, err := c.Sandboxes.Events(ctx, g.SandboxID, 0)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range ev {
		kinds = append(kinds, e.Kind+"/"+e.Cause)
	}
	if got := strings.Join(kinds, " "); !strings.Contains(got, "idle/timeout hibernated/timeout") || !strings.Contains(got, "resumed/auto-resume") {
		t.Errorf("events: %s", got)
	}
}
