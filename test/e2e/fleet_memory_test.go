package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/client"
)

// TestFleetMoveWithMemory moves one gvisor sandbox between the two nodes
// of a fleet three times — hibernated, paused, and running with ?stop=true
// — and after each the same process (same pid inside) carries on counting
// from where it was in memory, with the sandbox's files; the target holds
// it hibernated (processes on disk) until resumed. Then a memory snapshot
// pulled to the other node forks there with its processes running, and
// bad input (a damaged memory section, a memory bundle into a node
// without gvisor) is refused or reported and leaves nothing.
func TestFleetMoveWithMemory(t *testing.T) {
	t.Parallel()
	f := startFleet(t, 2, 1, "--runsc", requireRunsc(t))
	ctx := ctxT(t, 8*time.Minute)
	g := f.client(ctx, 0)
	sb, err := g.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", Runtime: "gvisor"})
	if err != nil {
		t.Fatal(err)
	}
	id := sb.SandboxID
	if _, err := g.Commands.ExecWait(ctx, id, sh("echo kept > /workspace/mark && sync")); err != nil {
		t.Fatal(err)
	}
	ticker, err := g.Processes.Start(ctx, id, client.StartProcessRequest{Tag: "ticker", ExecRequest: sh(tickerScript)})
	if err != nil {
		t.Fatal(err)
	}
	last := counterPast(t, ctx, g, id, 5)

	if _, err := g.Lifecycle.Hibernate(ctx, id); err != nil {
		t.Fatal(err)
	}
	last = f.moveAndCheck(ctx, g, id, "hibernated", false, ticker.PID, last)
	if err := g.Lifecycle.Pause(ctx, id); err != nil {
		t.Fatal(err)
	}
	last = f.moveAndCheck(ctx, g, id, "paused", false, ticker.PID, last)
	f.moveAndCheck(ctx, g, id, "running", true, ticker.PID, last)

	holder := f.memberOf(ctx, id)
	f.pullAndFork(ctx, holder, id, ticker.PID)
	badMemoryBundles(t, ctx, f, holder, id)
}

// memberOf is the fleet member holding sandbox id.
func (f *fleetT) memberOf(ctx context.Context, id string) *fleetMember {
	name := f.sandboxNode(ctx, id)
	for _, m := range f.nodes {
		if m.name == name {
			return m
		}
	}
	f.t.Fatalf("sandbox %s is on no node of the fleet (%q)", id, name)
	return nil
}

// moveAndCheck moves sandbox id (in state was) to the other node and
// checks it arrived hibernated with its processes: once resumed, process
// pid is running and its counter went on past last. It returns the
// counter.
func (f *fleetT) moveAndCheck(ctx context.Context, g *client.Client, id, was string, stop bool, pid int32, last int) int {
	t := f.t
	t.Helper()
	from := f.sandboxNode(ctx, id)
	began := time.Now()
	res, err := g.Lifecycle.Move(ctx, id, "", stop)
	if err != nil {
		t.Fatalf("move the %s sandbox: %v", was, err)
	}
	t.Logf("moved a %s gvisor sandbox with its memory %s → %s in %s", was, from, res.To, time.Since(began).Round(time.Millisecond))
	if res.To == from {
		t.Fatalf("moved to %s, where it was", res.To)
	}
	waitFor(t, 30*time.Second, "the Sandbox object on "+res.To, func() bool { return f.sandboxNode(ctx, id) == res.To })
	det, err := g.Sandboxes.Get(ctx, id)
	if err != nil || det.State != "hibernated" || det.Metadata["warren.dev/moved-with"] != "memory" {
		t.Fatalf("the %s sandbox after its move: %v %+v; want hibernated, moved with memory", was, err, det)
	}
	if !strings.Contains(det.Reason, "with its memory") || (was != "hibernated" && !strings.Contains(det.Reason, "it was "+was)) {
		t.Errorf("the %s sandbox's reason after its move: %q", was, det.Reason)
	}
	if left := gvisorProcesses(t, id); len(left) > 0 {
		t.Errorf("a moved sandbox has processes before it is resumed:\n%s", strings.Join(left, "\n"))
	}
	if _, err := g.Lifecycle.Resume(ctx, id); err != nil {
		t.Fatalf("resume the moved %s sandbox: %v", was, err)
	}
	now := counterOf(t, ctx, g, id)
	if now < last {
		t.Errorf("moved %s: the counter is %d, it was %d before the move (a fresh process would start at 1)", was, now, last)
	}
	if procs, err := g.Processes.List(ctx, id); err != nil || !hasRunning(procs, pid) {
		t.Errorf("moved %s: the ticker (pid %d) is not running: %+v %v", was, pid, procs, err)
	}
	if res, err := g.Commands.ExecWait(ctx, id, sh("cat /workspace/mark")); err != nil || res.Stdout != "kept\n" {
		t.Errorf("moved %s: the file: %+v %v", was, res, err)
	}
	// Once resumed, no memory image is left on the target (the move's
	// snapshot keeps its files only), nor on the source, but for the
	// replicas' copies of the sandbox at its last hibernation, which a
	// restore after a node loss wakes from.
	for _, m := range f.nodes {
		if left := strayMemoryImages(t, ctx, m); len(left) > 0 {
			t.Errorf("moved %s and resumed: %s holds memory images %v", was, m.name, left)
		}
	}
	return counterPast(t, ctx, g, id, now)
}

// strayMemoryImages lists the memory images on node m that no replica
// snapshot holds.
func strayMemoryImages(t *testing.T, ctx context.Context, m *fleetMember) []string {
	t.Helper()
	left, _ := filepath.Glob(filepath.Join(m.d.dataDir, "memory", "*"))
	return slices.DeleteFunc(left, func(p string) bool {
		id, ok := strings.CutPrefix(filepath.Base(p), "snapshot-")
		if !ok {
			return false
		}
		snap, err := m.d.client().Snapshots.Get(ctx, id)
		return err == nil && snap.Labels["warren.dev/replica"] == "true"
	})
}

// pullAndFork takes a memory snapshot of sandbox id on its node, has the
// other node pull it, and forks it there: the fork's ticker (pid) runs.
func (f *fleetT) pullAndFork(ctx context.Context, holder *fleetMember, id string, pid int32) {
	t := f.t
	ch := holder.d.client()
	snap, err := ch.Snapshots.Create(ctx, id, client.NewSnapshot{Name: "warm", Memory: true})
	if err != nil || snap.MemoryBytes <= 0 {
		t.Fatalf("memory snapshot: %+v %v", snap, err)
	}
	other := f.nodes[0]
	if other == holder {
		other = f.nodes[1]
	}
	key := f.adminKey(ctx)
	waitFor(t, 30*time.Second, "the holder to accept the fleet's key", func() bool {
		_, _, err := client.New("http://"+holder.d.addr, key).Snapshots.List(ctx, client.SnapshotListOptions{})
		return err == nil
	})
	began := time.Now()
	code, body := other.d.postAPI(ctx, "/snapshots/pull", fmt.Sprintf(`{"from":"http://%s","snapshot":%q,"team":"admin","memory":"require"}`, holder.d.addr, snap.SnapshotID))
	if code != http.StatusCreated || !strings.Contains(body, `"memoryBytes"`) {
		t.Fatalf("pull the memory snapshot: %d %s", code, body)
	}
	t.Logf("pulled a memory snapshot (%d bytes of memory) in %s", snap.MemoryBytes, time.Since(began).Round(time.Millisecond))
	co := other.d.client()
	fork, err := co.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: snap.SnapshotID})
	if err != nil {
		t.Fatalf("fork the pulled memory snapshot: %v", err)
	}
	if procs, err := co.Processes.List(ctx, fork.SandboxID); err != nil || !hasRunning(procs, pid) {
		t.Errorf("the fork on the other node: ticker (pid %d) not running: %+v %v", pid, procs, err)
	}
	counterPast(t, ctx, co, fork.SandboxID, counterOf(t, ctx, co, fork.SandboxID))
}

// badMemoryBundles: a bundle whose memory section is damaged or cut is
// refused by a gvisor node and leaves nothing; a node without gvisor
// refuses a memory bundle when asked to keep the memory, and otherwise
// imports its files and says the memory was dropped.
func badMemoryBundles(t *testing.T, ctx context.Context, f *fleetT, holder *fleetMember, id string) {
	ch := holder.d.client()
	snap, err := ch.Snapshots.Create(ctx, id, client.NewSnapshot{Name: "warm2", Memory: true})
	if err != nil {
		t.Fatal(err)
	}
	r, err := ch.Snapshots.Export(ctx, snap.SnapshotID, "")
	if err != nil {
		t.Fatal(err)
	}
	good, err := io.ReadAll(r)
	r.Close()
	if err != nil || !bytes.Contains(good[:4096], []byte(`"version":4`)) || !bytes.Contains(good[:4096], []byte(`"memory":{`)) {
		t.Fatalf("export of a memory snapshot: %d bytes, %v; want a version 4 bundle with a memory section", len(good), err)
	}
	other := f.nodes[0]
	if other == holder {
		other = f.nodes[1]
	}
	damaged := bytes.Clone(good)
	damaged[len(damaged)-5000] ^= 0x10 // inside the memory section
	for what, b := range map[string][]byte{"damaged": damaged, "cut": good[:len(good)-3000]} {
		_, err := other.d.client().Snapshots.Import(ctx, bytes.NewReader(b), false)
		if client.StatusCode(err) != http.StatusBadRequest {
			t.Errorf("import a bundle whose memory section is %s: %v, want 400", what, err)
		}
		t.Logf("%s memory section: %v", what, err)
	}
	if _, err := other.d.client().Snapshots.Get(ctx, snap.SnapshotID); client.StatusCode(err) != http.StatusNotFound {
		t.Errorf("refused imports left snapshot %s: %v", snap.SnapshotID, err)
	}
	if left, _ := filepath.Glob(filepath.Join(other.d.dataDir, "memory", "*"+snap.SnapshotID+"*")); len(left) > 0 {
		t.Errorf("refused imports left memory images: %v", left)
	}
	if left, _ := filepath.Glob(filepath.Join(other.d.dataDir, "memory", "incoming-*")); len(left) > 0 {
		t.Errorf("refused imports left incoming images: %v", left)
	}

	// WARREN_RUNSC reaches every daemon the tests start: this one is told
	// of a runsc that is not there, so it has no gvisor.
	native := busyboxDaemon(t, "--runsc", filepath.Join(t.TempDir(), "no-runsc"))
	cn := native.client()
	_, err = cn.Snapshots.ImportWith(ctx, bytes.NewReader(good), client.ImportOptions{RequireMemory: true})
	if client.StatusCode(err) != http.StatusNotImplemented || !strings.Contains(err.Error(), "memory") {
		t.Errorf("a memory bundle into a node without gvisor, memory required: %v, want 501", err)
	}
	if _, err := cn.Snapshots.Get(ctx, snap.SnapshotID); client.StatusCode(err) != http.StatusNotFound {
		t.Errorf("a refused import left snapshot %s: %v", snap.SnapshotID, err)
	}
	got, err := cn.Snapshots.Import(ctx, bytes.NewReader(good), false)
	if err != nil || got.MemoryDropped == "" || got.MemoryBytes != 0 {
		t.Fatalf("a memory bundle into a node without gvisor: %+v %v; want its files, memory dropped", got, err)
	}
	t.Logf("node without gvisor: %s", got.MemoryDropped)
	sb, err := cn.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: got.SnapshotID})
	if err != nil {
		t.Fatalf("create from the files of a memory snapshot: %v", err)
	}
	if res, err := cn.Commands.ExecWait(ctx, sb.SandboxID, sh("cat /workspace/mark")); err != nil || res.Stdout != "kept\n" {
		t.Errorf("the files of the dropped-memory import: %+v %v", res, err)
	}
	if entries, _ := os.ReadDir(filepath.Join(native.dataDir, "memory")); len(entries) > 0 {
		t.Errorf("a node without gvisor kept memory images: %d", len(entries))
	}
}
