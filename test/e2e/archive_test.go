package e2e

import (
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/warrenhq/warren/client"
)

// TestArchivedTurns runs 60 turns with --archive-after 8 --anchor-every 20:
// old turns leave the pool as a chain of send streams (each against the
// turn before), survive a kill -9 of the daemon mid-archive, and roll back
// byte-for-byte; a deleted turn stays a link of the chain while later turns
// need it.
func TestArchivedTurns(t *testing.T) {
	t.Parallel()
	d := busyboxDaemon(t, "--archive-after", "8", "--anchor-every", "20")
	c := d.client()
	ctx := ctxT(t, 5*time.Minute)
	sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb"})
	if err != nil {
		t.Fatal(err)
	}
	run := func(cmd string) string {
		t.Helper()
		res, err := c.Commands.ExecWait(ctx, sb.SandboxID, client.ExecRequest{Command: cmd, User: "root"})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%.60s: %v %+v", cmd, err, res)
		}
		return res.Stdout
	}
	turns := map[int]string{}
	manifests := map[int]string{}
	var snapTimes []time.Duration
	for n := 1; n <= 60; n++ {
		run(turnCmd(n))
		start := time.Now()
		res, err := c.Commands.ExecWait(ctx, sb.SandboxID, client.ExecRequest{Cmd: []string{"true"}, Turn: true})
		if err != nil || res.SnapshotID == "" {
			t.Fatalf("turn %d: %v %+v", n, err, res)
		}
		snapTimes = append(snapTimes, time.Since(start))
		turns[n] = res.SnapshotID
		if n == 5 || n == 33 {
			manifests[n] = run(manifestCmd)
		}
	}
	sort.Slice(snapTimes, func(i, j int) bool { return snapTimes[i] < snapTimes[j] })
	t.Logf("60 turns: exec+snapshot p50 %v, max %v", snapTimes[30], snapTimes[59])

	volumes := filepath.Join(d.dataDir, "pool", "volumes")
	onDisk := func(id string) (vol, stream bool) {
		_, verr := os.Stat(filepath.Join(volumes, "snapshots", id))
		_, serr := os.Stat(filepath.Join(volumes, "archive", id+".stream"))
		return verr == nil, serr == nil
	}
	states := func() map[int]string {
		t.Helper()
		snaps, _, err := c.Snapshots.List(ctx, client.SnapshotListOptions{SandboxID: sb.SandboxID, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		out := map[int]string{}
		for _, s := range snaps {
			out[s.Turn] = s.State
		}
		return out
	}
	// Anchors, the newest 8, and turn 52 until turn 53 is sent against it.
	isKept := func(n int) bool { return n%20 == 1 || n >= 52 }

	// Kill the daemon while the archiver works through the backlog.
	deadline := time.Now().Add(30 * time.Second)
	archived := 0
	for ; archived < 5 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		archived = 0
		for _, st := range states() {
			if st == "archived" {
				archived++
			}
		}
	}
	d.stop(syscall.SIGKILL)
	t.Logf("killed the daemon with %d of 49 turns archived", archived)
	d.start()
	c = d.client()
	// The archiver runs again at once, so a record and the disk are read at
	// slightly different moments: a turn it is moving may look half-way
	// for an instant. Every turn must settle to a whole state.
	consistent := func(st string, vol, stream bool) bool {
		return (st == "ready" && vol) || (st == "archived" && stream && !vol)
	}
	for n := range states() {
		var st string
		var vol, stream bool
		for try := 0; try < 40; try++ {
			st = states()[n]
			vol, stream = onDisk(turns[n])
			if consistent(st, vol, stream) && states()[n] == st {
				break
			}
			time.Sleep(25 * time.Millisecond)
		}
		if !consistent(st, vol, stream) {
			t.Errorf("after kill -9: turn %d is %s, volume %t, stream %t", n, st, vol, stream)
		}
	}
	if got := len(states()); got != 60 {
		t.Fatalf("after kill -9: %d turns listed, want 60", got)
	}

	// Wait for the archiver to finish: the pool then holds the anchors, the
	// newest 8 turns and turn 52.
	deadline = time.Now().Add(2 * time.Minute)
	for {
		pending := 0
		for n, st := range states() {
			if !isKept(n) && st != "archived" {
				pending++
			}
		}
		if pending == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d turns still not archived:\n%v", pending, states())
		}
		time.Sleep(100 * time.Millisecond)
	}
	entries, err := os.ReadDir(filepath.Join(volumes, "snapshots"))
	if err != nil {
		t.Fatal(err)
	}
	inPool := map[string]bool{}
	for _, e := range entries {
		inPool[e.Name()] = true
	}
	for n := 1; n <= 60; n++ {
		vol, stream := onDisk(turns[n])
		if vol != isKept(n) || (!isKept(n) && !stream) {
			t.Errorf("turn %d: volume in pool %t, stream %t", n, vol, stream)
		}
		delete(inPool, turns[n])
	}
	if len(inPool) != 0 {
		t.Errorf("volumes in the pool that are no turn: %v", inPool)
	}

	// Roll back to archived turns: restored on demand, byte-for-byte.
	for _, n := range []int{5, 33} {
		start := time.Now()
		rb, err := c.Snapshots.Rollback(ctx, sb.SandboxID, client.RollbackRequest{SnapshotID: turns[n]})
		if err != nil || !rb.ProcessesRestarted {
			t.Fatalf("rollback to archived turn %d: %+v %v", n, rb, err)
		}
		t.Logf("rollback to archived turn %d (restore + rollback): %v", n, time.Since(start))
		if m := run(manifestCmd); m != manifests[n] {
			t.Fatalf("after rollback to turn %d the tree differs from its manifest:\n%s\nwant:\n%s", n, m, manifests[n])
		}
		if s, err := c.Snapshots.Get(ctx, turns[n]); err != nil || s.State != "ready" {
			t.Errorf("turn %d after its restore: %+v %v", n, s, err)
		}
	}
	// For comparison: a rollback to a turn still in the pool.
	start := time.Now()
	if _, err := c.Snapshots.Rollback(ctx, sb.SandboxID, client.RollbackRequest{SnapshotID: turns[58]}); err != nil {
		t.Fatal(err)
	}
	t.Logf("rollback to turn 58 (in the pool): %v", time.Since(start))

	// An anchor that archived turns depend on is not deleted.
	if err := c.Snapshots.Delete(ctx, turns[21]); err == nil {
		t.Error("deleting anchor turn 21 succeeded while archived turns depend on it")
	}
	// An archived turn that later turns are deltas against is deleted, but
	// its stream stays as their link: turn 31 still rolls back through it.
	if err := c.Snapshots.Delete(ctx, turns[30]); err != nil {
		t.Fatal(err)
	}
	if s, err := c.Snapshots.Get(ctx, turns[30]); err != nil || s.State != "deleted" {
		t.Errorf("turn 30 after delete: %+v %v", s, err)
	}
	if _, stream := onDisk(turns[30]); !stream {
		t.Error("deleted turn 30 lost the stream turn 31 needs")
	}
	start = time.Now()
	if _, err := c.Snapshots.Rollback(ctx, sb.SandboxID, client.RollbackRequest{SnapshotID: turns[31]}); err != nil {
		t.Fatalf("rollback to turn 31 through deleted turn 30: %v", err)
	}
	t.Logf("rollback to archived turn 31 (a chain of 10 streams through a deleted one): %v", time.Since(start))
	if got := run("tail -n 1 /workspace/log.txt"); got != "log line 31\n" {
		t.Errorf("after rollback to turn 31: the log ends %q", got)
	}
	// An archived turn nothing needs is deleted with its stream.
	if err := c.Snapshots.Delete(ctx, turns[40]); err != nil {
		t.Fatal(err)
	}
	if _, stream := onDisk(turns[40]); stream {
		t.Error("deleted archived turn 40 kept its stream")
	}
}
