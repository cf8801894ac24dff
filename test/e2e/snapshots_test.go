package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/warrenhq/warren/client"
)

// manifest lists every file under the agent's working areas with its
// checksum, inside the sandbox: a byte-for-byte fingerprint of the tree.
const manifestCmd = `find /workspace /usr/local -xdev \( -type f -o -type l \) | sort | while read f; do ` +
	`if [ -L "$f" ]; then echo "L $f $(readlink "$f")"; else echo "F $f $(md5sum < "$f" | cut -d' ' -f1) $(stat -c %a "$f")"; fi; done`

// turnCmd is what turn n of the agent-like loop does: add, modify and
// delete files, and "install" a tool under /usr/local.
func turnCmd(n int) string {
	return fmt.Sprintf(`set -e
mkdir -p /workspace/src/m%[2]d
echo "turn %[1]d" > /workspace/src/m%[2]d/f%[1]d.txt
echo "log line %[1]d" >> /workspace/log.txt
head -c %[3]d /dev/urandom > /workspace/blob.bin
rm -f /workspace/src/m%[4]d/f%[5]d.txt
printf '#!/bin/sh\necho tool %[1]d\n' > /usr/local/bin/tool%[6]d && chmod 755 /usr/local/bin/tool%[6]d
ln -sf /usr/local/bin/tool%[6]d /workspace/current-tool`,
		n, n%10, 1000+n*37%4000, (n+5)%10, n-3, n%7)
}

// snapshotSandbox starts a busybox daemon (with args) and a sandbox with a
// 256 MB disk in it; run runs a command in a sandbox as root and returns
// its output, failing the test on an error or a non-zero exit.
func snapshotSandbox(t *testing.T, timeout time.Duration, args ...string) (d *daemon, ctx context.Context, id string, run func(id, cmd string) string) {
	t.Helper()
	d = busyboxDaemon(t, args...)
	c := d.client()
	ctx = ctxT(t, timeout)
	sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", Limits: &client.Limits{DiskMB: 256}})
	if err != nil {
		t.Fatal(err)
	}
	run = func(id, cmd string) string {
		t.Helper()
		res, err := c.Commands.ExecWait(ctx, id, client.ExecRequest{Command: cmd, User: "root"})
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		if res.ExitCode != 0 {
			t.Fatalf("%.60s: exit %d: %s", cmd, res.ExitCode, res.Stderr)
		}
		return res.Stdout
	}
	return d, ctx, sb.SandboxID, run
}

// TestSnapshotsAgentLoop runs 200 agent turns with a snapshot each, then
// rolls back and forward, forks, diffs, promotes and hits a quota.
func TestSnapshotsAgentLoop(t *testing.T) {
	t.Parallel()
	d, ctx, sbID, run := snapshotSandbox(t, 10*time.Minute, "--max-turns", "250")
	c, sb := d.client(), client.Sandbox{SandboxID: sbID}

	turns := map[int]string{}
	manifests := map[int]string{}
	var snapTimes []time.Duration
	for n := 1; n <= 200; n++ {
		if n == 100 {
			// Turn 100's changes are known exactly, for the diff check.
			run(sb.SandboxID, "echo changed >> /workspace/log.txt; echo new > /workspace/hundred.txt; rm -rf /workspace/src/m9")
		} else {
			run(sb.SandboxID, turnCmd(n))
		}
		start := time.Now()
		res, err := c.Commands.ExecWait(ctx, sb.SandboxID, client.ExecRequest{Cmd: []string{"true"}, Turn: true})
		if err != nil || res.SnapshotID == "" {
			t.Fatalf("turn %d: %v %+v", n, err, res)
		}
		snapTimes = append(snapTimes, time.Since(start))
		turns[n] = res.SnapshotID
		if n == 37 || n == 150 || n == 100 {
			manifests[n] = run(sb.SandboxID, manifestCmd)
			if !strings.Contains(manifests[n], "F /workspace/log.txt ") || !strings.Contains(manifests[n], "L /workspace/current-tool /usr/local/bin/tool") {
				t.Fatalf("manifest of turn %d lacks files:\n%s", n, manifests[n])
			}
		}
	}
	sort.Slice(snapTimes, func(i, j int) bool { return snapTimes[i] < snapTimes[j] })
	t.Logf("200 turns: exec+snapshot p50 %v, p99 %v", snapTimes[100], snapTimes[197])
	if snaps, _, err := c.Snapshots.List(ctx, client.SnapshotListOptions{SandboxID: sb.SandboxID, Limit: 1000}); err != nil || len(snaps) != 200 {
		t.Fatalf("snapshots kept: %d %v", len(snaps), err)
	}

	// Diff 99 → 100 is exactly what turn 100 did (plus its directories).
	diff, err := c.Snapshots.Diff(ctx, turns[99], turns[100], false)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range diff.Changes {
		if e.Type != "dir" || e.Change != "modified" {
			got[e.Path] = e.Change
		}
	}
	want := map[string]string{"/workspace/log.txt": "modified", "/workspace/hundred.txt": "added", "/workspace/src/m9": "removed"}
	for p, k := range want {
		if got[p] != k {
			t.Errorf("diff 99→100: %s is %q, want %q (all: %v)", p, got[p], k, got)
		}
	}
	for p, k := range got {
		if want[p] == "" && !(k == "removed" && strings.HasPrefix(p, "/workspace/src/m9/")) {
			t.Errorf("diff 99→100: unexpected %s %s", k, p)
		}
	}

	// Roll back to turn 37: the tree is byte-for-byte what it was.
	rb, err := c.Snapshots.Rollback(ctx, sb.SandboxID, client.RollbackRequest{SnapshotID: turns[37]})
	if err != nil || !rb.ProcessesRestarted {
		t.Fatalf("rollback: %+v %v", rb, err)
	}
	if m := run(sb.SandboxID, manifestCmd); m != manifests[37] {
		t.Fatalf("after rollback to turn 37 the tree differs from its manifest:\n%s\nwant:\n%s", m, manifests[37])
	}
	// And forward again to 150: later snapshots stayed.
	if _, err := c.Snapshots.Rollback(ctx, sb.SandboxID, client.RollbackRequest{SnapshotID: turns[150]}); err != nil {
		t.Fatal(err)
	}
	if m := run(sb.SandboxID, manifestCmd); m != manifests[150] {
		t.Fatal("after rolling forward to turn 150 the tree differs from its manifest")
	}
	// The old roots the two rollbacks swapped out are dropped in the
	// background, after the answer; none is left behind.
	waitNoScratch(t, d.dataDir)

	// Fork 10 from turn 100; each changes its copy; nobody sees another's.
	forks, err := c.Snapshots.Fork(ctx, sb.SandboxID, client.ForkRequest{SnapshotID: turns[100], Count: 10})
	if err != nil || len(forks) != 10 {
		t.Fatalf("fork: %v %v", forks, err)
	}
	var forkIDs []string
	for i, f := range forks {
		if f.Error != nil {
			t.Fatalf("fork %d: %v", i, f.Error)
		}
		forkIDs = append(forkIDs, f.Sandbox.SandboxID)
	}
	for i, id := range forkIDs {
		if m := run(id, manifestCmd); m != manifests[100] {
			t.Fatalf("fork %d does not start from turn 100's tree", i)
		}
		run(id, fmt.Sprintf("echo fork %d > /workspace/mine.txt", i))
	}
	for i, id := range forkIDs {
		if got := run(id, "cat /workspace/mine.txt"); got != fmt.Sprintf("fork %d\n", i) {
			t.Fatalf("fork %d sees %q", i, got)
		}
	}
	if out := run(sb.SandboxID, "ls /workspace/mine.txt 2>&1 || true"); !strings.Contains(out, "No such file") {
		t.Fatalf("the parent sees a fork's file: %q", out)
	}

	// Promote fork 3: the parent gets its tree, and keeps its own history.
	pr, err := c.Snapshots.Promote(ctx, forkIDs[3])
	if err != nil || pr.PreviousSnapshotID == "" {
		t.Fatalf("promote: %+v %v", pr, err)
	}
	if got := run(sb.SandboxID, "cat /workspace/mine.txt"); got != "fork 3\n" {
		t.Fatalf("parent after promote: %q", got)
	}
	if _, err := c.Snapshots.Rollback(ctx, sb.SandboxID, client.RollbackRequest{SnapshotID: pr.PreviousSnapshotID}); err != nil {
		t.Fatal(err)
	}
	if m := run(sb.SandboxID, manifestCmd); m != manifests[150] {
		t.Fatal("the state before the promote was not kept")
	}

	lin, err := c.Snapshots.Lineage(ctx, forkIDs[5])
	if err != nil || lin.Family != sb.SandboxID || len(lin.Edges) < 200 {
		t.Fatalf("lineage: family %s, %d edges, %v", lin.Family, len(lin.Edges), err)
	}
	if out := d.mustCLI("lineage", sb.SandboxID); !strings.Contains(out, "turn-37") || !strings.Contains(out, forkIDs[9]) {
		t.Fatalf("lineage tree lacks nodes:\n%.2000s", out)
	}

	// The quota: a write past it fails inside, the daemon stays healthy.
	res, err := c.Commands.ExecWait(ctx, sb.SandboxID, client.ExecRequest{Command: "dd if=/dev/zero of=/workspace/fill bs=1M count=400 2>&1; sync"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Stdout, "quota exceeded") && !strings.Contains(res.Stdout, "No space left") {
		t.Fatalf("writing past the quota: %+v", res)
	}
	if det, err := c.Sandboxes.Get(ctx, sb.SandboxID); err != nil || det.DiskUsedBytes <= 0 || det.DiskUsedBytes > 260<<20 {
		t.Fatalf("disk use after the quota hit: %+v %v", det, err)
	}
	for _, id := range forkIDs[:2] {
		run(id, "head -c 1000000 /dev/zero > /workspace/ok.bin") // other sandboxes unaffected
	}
	run(sb.SandboxID, "rm /workspace/fill && echo freed")

	for _, id := range append(forkIDs, sb.SandboxID) {
		if err := c.Sandboxes.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSnapshotBadInput checks the 4xx answers of the snapshot API.
func TestSnapshotBadInput(t *testing.T) {
	t.Parallel()
	d := busyboxDaemon(t)
	c := d.client()
	ctx := ctxT(t, 2*time.Minute)
	a, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb"})
	if err != nil {
		t.Fatal(err)
	}
	snapB, err := c.Snapshots.Create(ctx, b.SandboxID, client.NewSnapshot{Name: "b-state"})
	if err != nil {
		t.Fatal(err)
	}
	k, err := c.APIKeys.Create(ctx, client.NewAPIKey{Team: "other"})
	if err != nil {
		t.Fatal(err)
	}
	other := client.New("http://"+d.addr, k.Key)
	check := func(what string, err error, code int) {
		t.Helper()
		if client.StatusCode(err) != code {
			t.Errorf("%s: want %d, got %v", what, code, err)
		} else if err.Error() == "" {
			t.Errorf("%s: empty message", what)
		}
	}
	_, err = c.Snapshots.Rollback(ctx, a.SandboxID, client.RollbackRequest{SnapshotID: "nosuchsnapshot"})
	check("rollback to an unknown snapshot", err, 404)
	_, err = c.Snapshots.Rollback(ctx, a.SandboxID, client.RollbackRequest{SnapshotID: snapB.SnapshotID})
	check("rollback to another family's snapshot", err, 400)
	_, err = c.Snapshots.Rollback(ctx, a.SandboxID, client.RollbackRequest{})
	check("rollback without a snapshot", err, 400)
	_, err = other.Snapshots.Create(ctx, a.SandboxID, client.NewSnapshot{})
	check("snapshot of another team's sandbox", err, 404)
	_, err = other.Snapshots.Get(ctx, snapB.SnapshotID)
	check("another team's snapshot", err, 404)
	_, err = other.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: snapB.SnapshotID})
	check("create from another team's snapshot", err, 404)
	_, err = c.Snapshots.Fork(ctx, a.SandboxID, client.ForkRequest{Count: -2})
	check("fork count -2", err, 400)
	_, err = c.Snapshots.Fork(ctx, a.SandboxID, client.ForkRequest{Count: 100000})
	check("fork count above the limit", err, 400)
	if code, body := d.postAPI(ctx, "/sandboxes/"+a.SandboxID+"/fork", `{"count":0}`); code != 400 || !strings.Contains(body, "count 0") {
		t.Errorf("fork count 0: %d %s, want 400 naming the count", code, body)
	}
	_, err = c.Snapshots.Fork(ctx, b.SandboxID, client.ForkRequest{SnapshotID: snapB.SnapshotID, Memory: true})
	check("fork with memory of a snapshot taken without it", err, 400)
	// A refused promote leaves no snapshot of the fork behind.
	forks, err := c.Snapshots.Fork(ctx, b.SandboxID, client.ForkRequest{SnapshotID: snapB.SnapshotID})
	if err != nil || len(forks) != 1 || forks[0].Sandbox == nil {
		t.Fatalf("fork: %v %+v", err, forks)
	}
	fork := forks[0].Sandbox.SandboxID
	if _, err := c.Lifecycle.Stop(ctx, b.SandboxID, time.Second, false); err != nil {
		t.Fatal(err)
	}
	_, err = c.Snapshots.Promote(ctx, fork)
	check("promote into a stopped parent", err, 409)
	if snaps, _, err := c.Snapshots.List(ctx, client.SnapshotListOptions{SandboxID: fork, States: []string{"ready", "deleted"}}); err != nil || len(snaps) != 0 {
		t.Errorf("a refused promote left %d snapshots of the fork (%v)", len(snaps), err)
	}
	_, err = c.Snapshots.Create(ctx, a.SandboxID, client.NewSnapshot{Name: "b-state"})
	check("duplicate snapshot name", err, 409)
	_, err = c.Snapshots.Create(ctx, a.SandboxID, client.NewSnapshot{Name: "Bad/Name"})
	check("bad snapshot name", err, 400)
	_, err = c.Snapshots.Create(ctx, a.SandboxID, client.NewSnapshot{Name: "turn-5"})
	check("a turn's name", err, 400)
	if err != nil && !strings.Contains(err.Error(), `snapshot name "turn-5"`) {
		t.Errorf("a turn's name: %v; want the message to name the name", err)
	}
	_, err = c.Snapshots.Diff(ctx, "nosuchsnapshot", "live", false)
	check("diff of an unknown snapshot", err, 404)
	_, err = c.Snapshots.Promote(ctx, a.SandboxID)
	check("promote a sandbox that is not a fork", err, 400)
	// Creating from a snapshot works, and deleting it through E2B's route too.
	sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: snapB.SnapshotID})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Templates.Delete(ctx, snapB.SnapshotID); err != nil {
		t.Fatalf("DELETE /templates/{snapshotID}: %v", err)
	}
	_, err = c.Snapshots.Get(ctx, snapB.SnapshotID)
	if err != nil {
		t.Fatalf("a deleted snapshot keeps a tombstone: %v", err)
	}
	_, err = c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: snapB.SnapshotID})
	check("create from a deleted snapshot", err, 404)
	for _, id := range []string{a.SandboxID, b.SandboxID, sb.SandboxID, fork} {
		if err := c.Sandboxes.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
}

// TestForkSurvivesDaemonKill kills the daemon in the middle of a fork of
// 10 and checks that afterwards every sandbox and snapshot is whole and
// recorded, or gone.
func TestForkSurvivesDaemonKill(t *testing.T) {
	t.Parallel()
	d := busyboxDaemon(t)
	c := d.client()
	ctx := ctxT(t, 3*time.Minute)
	sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Commands.ExecWait(ctx, sb.SandboxID, client.ExecRequest{Command: "echo base > /workspace/f"}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		_, _ = c.Snapshots.Fork(fctx, sb.SandboxID, client.ForkRequest{Count: 10})
	}()
	time.Sleep(120 * time.Millisecond)
	d.stop(syscall.SIGKILL)
	wg.Wait()
	d.start()
	c = d.client()

	list, _, err := c.Sandboxes.List(ctx, client.ListOptions{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	running := 0
	for _, s := range list {
		switch s.State {
		case "running":
			running++
			res, err := c.Commands.ExecWait(ctx, s.SandboxID, client.ExecRequest{Cmd: []string{"cat", "/workspace/f"}})
			if err != nil || res.Stdout != "base\n" {
				t.Errorf("sandbox %s after the restart: %+v %v", s.SandboxID, res, err)
			}
		case "failed":
			if left := leftovers(t, d.dataDir, s.SandboxID); len(left) > 0 {
				t.Errorf("a fork that did not finish left parts:\n%s", strings.Join(left, "\n"))
			}
		default:
			t.Errorf("sandbox %s is %s after the restart", s.SandboxID, s.State)
		}
	}
	t.Logf("after the kill: %d of %d sandboxes running (1 is the parent)", running, len(list))
	// Snapshot volumes and ready records agree.
	snaps, _, err := c.Snapshots.List(ctx, client.SnapshotListOptions{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	ready := map[string]bool{}
	for _, s := range snaps {
		ready[s.SnapshotID] = true
	}
	vols, _ := os.ReadDir(filepath.Join(d.dataDir, "pool", "volumes", "snapshots"))
	for _, v := range vols {
		if !ready[v.Name()] {
			t.Errorf("snapshot volume %s has no ready record", v.Name())
		}
		delete(ready, v.Name())
	}
	for id := range ready {
		t.Errorf("snapshot %s is recorded ready but has no volume", id)
	}
	scratch, _ := os.ReadDir(filepath.Join(d.dataDir, "pool", "volumes", "scratch"))
	if len(scratch) > 0 {
		t.Errorf("scratch volumes left: %v", scratch)
	}
}

// waitNoScratch waits up to 30 s for the pool's scratch volumes (a
// rollback's old root among them) to be gone.
func waitNoScratch(t *testing.T, dataDir string) {
	t.Helper()
	dir := filepath.Join(dataDir, "pool", "volumes", "scratch")
	deadline := time.Now().Add(30 * time.Second)
	for {
		left, err := os.ReadDir(dir)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("scratch volumes still there 30 s after the rollbacks: %v", left)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestTurnUsableAtOnce uses each turn snapshot the instant its answer
// arrives: a turn is answered once its content is fixed, while btrfs
// still writes it out, so every operation on it must wait for that
// rather than find no volume. Each round fires a diff, a content read, a
// fork and a size query at once, then rolls back to the turn and checks
// the tree; the last rounds delete the turn, or the whole sandbox, at once.
func TestTurnUsableAtOnce(t *testing.T) {
	t.Parallel()
	d, ctx, sbID, run := snapshotSandbox(t, 5*time.Minute)
	c, sb := d.client(), client.Sandbox{SandboxID: sbID}
	prev, err := c.Snapshots.Turn(ctx, sb.SandboxID)
	if err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= 12; n++ {
		run(sb.SandboxID, fmt.Sprintf("echo round %d > /workspace/r%d.txt; head -c 200000 /dev/urandom > /workspace/blob", n, n))
		turn, err := c.Snapshots.Turn(ctx, sb.SandboxID)
		if err != nil {
			t.Fatalf("round %d: turn: %v", n, err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		wg.Add(4)
		go func() {
			defer wg.Done()
			diff, err := c.Snapshots.Diff(ctx, prev.SnapshotID, turn.SnapshotID, true)
			if err != nil {
				errs <- fmt.Errorf("diff: %w", err)
				return
			}
			for _, e := range diff.Changes {
				if e.Path == fmt.Sprintf("/workspace/r%d.txt", n) && e.Change == "added" && strings.Contains(e.Diff, fmt.Sprintf("round %d", n)) {
					return
				}
			}
			errs <- fmt.Errorf("diff lacks the new file with its content: %+v", diff.Changes)
		}()
		go func() {
			defer wg.Done()
			forks, err := c.Snapshots.Fork(ctx, sb.SandboxID, client.ForkRequest{SnapshotID: turn.SnapshotID, Count: 1})
			if err != nil || len(forks) != 1 || forks[0].Error != nil {
				errs <- fmt.Errorf("fork: %v %+v", err, forks)
				return
			}
			id := forks[0].Sandbox.SandboxID
			res, err := c.Commands.ExecWait(ctx, id, client.ExecRequest{Command: fmt.Sprintf("cat /workspace/r%d.txt", n)})
			if err != nil || res.Stdout != fmt.Sprintf("round %d\n", n) {
				errs <- fmt.Errorf("fork reads %+v %v", res, err)
			}
			if err := c.Sandboxes.Delete(ctx, id); err != nil {
				errs <- fmt.Errorf("delete fork: %w", err)
			}
		}()
		go func() {
			defer wg.Done()
			if _, err := c.Snapshots.Get(ctx, turn.SnapshotID); err != nil {
				errs <- fmt.Errorf("get: %w", err)
			}
		}()
		go func() {
			defer wg.Done()
			if _, err := c.Snapshots.Diff(ctx, turn.SnapshotID, "live", false); err != nil {
				errs <- fmt.Errorf("diff to live: %w", err)
			}
		}()
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("round %d: %v", n, err)
		}
		// Move on, then come back to the turn at once.
		run(sb.SandboxID, "rm -f /workspace/r*.txt")
		if n%3 == 0 {
			if _, err := c.Snapshots.Rollback(ctx, sb.SandboxID, client.RollbackRequest{SnapshotID: turn.SnapshotID}); err != nil {
				t.Fatalf("round %d: rollback: %v", n, err)
			}
			if got := run(sb.SandboxID, fmt.Sprintf("cat /workspace/r%d.txt", n)); got != fmt.Sprintf("round %d\n", n) {
				t.Fatalf("round %d: after rollback: %q", n, got)
			}
		}
		prev = turn
	}
	// Sizes are recorded once each turn is written.
	deadline := time.Now().Add(30 * time.Second)
	for {
		s, err := c.Snapshots.Get(ctx, prev.SnapshotID)
		if err != nil {
			t.Fatal(err)
		}
		if s.ReferencedBytes > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the last turn's sizes were never recorded: %+v", s)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Deleting a turn the instant it is answered, then taking another.
	doomed, err := c.Snapshots.Turn(ctx, sb.SandboxID)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Snapshots.Delete(ctx, doomed.SnapshotID); err != nil {
		t.Fatalf("delete the newest turn: %v", err)
	}
	if _, err := c.Snapshots.Turn(ctx, sb.SandboxID); err != nil {
		t.Fatalf("turn after deleting the last: %v", err)
	}
	// And the sandbox itself.
	run(sb.SandboxID, "echo last > /workspace/last.txt")
	if _, err := c.Snapshots.Turn(ctx, sb.SandboxID); err != nil {
		t.Fatal(err)
	}
	if err := c.Sandboxes.Delete(ctx, sb.SandboxID); err != nil {
		t.Fatalf("delete the sandbox right after a turn: %v", err)
	}
}

// A stopped sandbox keeps its tree: it can be snapshotted (no freeze: no
// processes), diffed against and forked, though it runs no more.
func TestStoppedSandboxKeepsTree(t *testing.T) {
	t.Parallel()
	d, ctx, id := busyboxSandbox(t, 2*time.Minute)
	c := d.client()
	if _, err := c.Commands.ExecWait(ctx, id, sh("echo kept > /workspace/result")); err != nil {
		t.Fatal(err)
	}
	before, err := c.Snapshots.Create(ctx, id, client.NewSnapshot{Name: "before-stop"})
	if err != nil {
		t.Fatal(err)
	}
	// Left in the page cache by a process the stop kills.
	if _, err := c.Commands.ExecWait(ctx, id, sh("echo last > /workspace/last")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Lifecycle.Stop(ctx, id, time.Second, false); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Snapshots.Turn(ctx, id); client.StatusCode(err) != 409 {
		t.Errorf("turn of a stopped sandbox: %v, want 409", err)
	}
	if _, err := c.Snapshots.Create(ctx, id, client.NewSnapshot{Memory: true}); client.StatusCode(err) != 409 {
		t.Errorf("memory snapshot of a stopped sandbox: %v, want 409", err)
	}
	diff, err := c.Snapshots.Diff(ctx, before.SnapshotID, "live", false)
	if err != nil || len(diff.Changes) == 0 || diff.Added == 0 {
		t.Fatalf("diff to a stopped sandbox's tree: %+v, %v; want /workspace/last added", diff, err)
	}
	if byName, err := c.Snapshots.Diff(ctx, before.SnapshotID, diff.To, false); err != nil || byName.Added != diff.Added || byName.To != diff.To {
		t.Errorf("diff to %q (the name the answer gave): %+v, %v", diff.To, byName, err)
	}
	if _, err := c.Snapshots.Diff(ctx, before.SnapshotID, "live:nosuchsandbox", false); client.StatusCode(err) != 404 {
		t.Errorf("diff to live:nosuchsandbox: %v, want 404", err)
	}
	final, err := c.Snapshots.Create(ctx, id, client.NewSnapshot{Name: "final"})
	if err != nil {
		t.Fatalf("snapshot of a stopped sandbox: %v", err)
	}
	if final.FrozenMs != 0 {
		t.Errorf("a stopped sandbox was frozen for %.1f ms", final.FrozenMs)
	}
	forks, err := c.Snapshots.Fork(ctx, id, client.ForkRequest{Count: 1})
	if err != nil || len(forks) != 1 || forks[0].Sandbox == nil {
		t.Fatalf("fork of a stopped sandbox's tree: %+v, %v", forks, err)
	}
	from, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: final.SnapshotID})
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range []string{forks[0].Sandbox.SandboxID, from.SandboxID} {
		res, err := c.Commands.ExecWait(ctx, sb, sh("cat /workspace/result /workspace/last"))
		if err != nil || res.Stdout != "kept\nlast\n" {
			t.Errorf("sandbox %s made from the stopped tree reads %+v, %v", sb, res, err)
		}
		if err := c.Sandboxes.Delete(ctx, sb); err != nil {
			t.Fatal(err)
		}
	}
	// Deleted, its family's history is still there to see.
	if err := c.Sandboxes.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := d.cli("", "lineage", id)
	if code != 0 || !strings.Contains(out, final.SnapshotID) || !strings.Contains(out, "before-stop") {
		t.Errorf("lineage of the deleted sandbox: exit %d, %s%s", code, out, stderr)
	}
}

// A command cut short by a forced rollback says so, waiting or streaming;
// an unforced rollback is refused while it runs.
func TestExecCutByRollback(t *testing.T) {
	t.Parallel()
	d, ctx, id := busyboxSandbox(t, 2*time.Minute)
	c := d.client()
	snap, err := c.Snapshots.Create(ctx, id, client.NewSnapshot{Name: "s"})
	if err != nil {
		t.Fatal(err)
	}
	for _, streaming := range []bool{false, true} {
		errc := make(chan error, 1)
		go func() {
			req := client.ExecRequest{Cmd: []string{"sleep", "60"}}
			var err error
			if streaming {
				_, err = c.Commands.Exec(ctx, id, req, nil, nil)
			} else {
				_, err = c.Commands.ExecWait(ctx, id, req)
			}
			errc <- err
		}()
		deadline := time.Now().Add(20 * time.Second)
		for {
			res, err := c.Commands.ExecWait(ctx, id, sh("ps | grep -q '[s]leep 60'"))
			if err == nil && res.ExitCode == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the command does not start: %+v, %v", res, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		_, err := c.Snapshots.Rollback(ctx, id, client.RollbackRequest{SnapshotID: snap.SnapshotID})
		if client.StatusCode(err) != 409 || !strings.Contains(err.Error(), "--force") {
			t.Errorf("rollback while a command runs: %v, want 409 naming --force", err)
		}
		if _, err := c.Snapshots.Rollback(ctx, id, client.RollbackRequest{SnapshotID: snap.SnapshotID, Force: true}); err != nil {
			t.Fatal(err)
		}
		err = <-errc
		if !strings.Contains(fmt.Sprint(err), "was rolled back to snapshot "+snap.SnapshotID+" while the command ran") {
			t.Errorf("streaming %v: command cut by a forced rollback: %v, want the reason", streaming, err)
		}
		if !streaming && client.StatusCode(err) != 409 {
			t.Errorf("waiting exec cut by a rollback: status %d, want 409", client.StatusCode(err))
		}
	}
}
