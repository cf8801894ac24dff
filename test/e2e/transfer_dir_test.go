package e2e

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/client"
)

// TestDirSnapshotTransfer moves a snapshot between two daemons on the dir
// storage backend (own data dirs): the bundle's body is a tar. A delta is
// refused (501: the dir backend has none), a flipped byte, a cut bundle
// and a newer format are refused with a 4xx leaving nothing, importing
// twice gives one snapshot, and the import is first-class on B: a sandbox
// made from it has A's files (a symlink pointing out of the sandbox kept as
// a symlink), it forks, it keeps its family and template, and it diffs
// against another import.
func TestDirSnapshotTransfer(t *testing.T) {
	dirDaemon := func() *daemon {
		d := newDaemon(t, "--storage", "dir")
		d.start()
		d.mustCLI("template", "build", "bb", "--busybox", "--data-dir", d.dataDir, "--storage", "dir")
		return d
	}
	a, b := dirDaemon(), dirDaemon()
	ca, cb := a.client(), b.client()
	ctx := ctxT(t, 10*time.Minute)
	sb, err := ca.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb"})
	if err != nil {
		t.Fatal(err)
	}
	run := func(c *client.Client, id, cmd string) string {
		t.Helper()
		res, err := c.Commands.ExecWait(ctx, id, client.ExecRequest{Command: cmd, User: "root"})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%.60s: %v %+v", cmd, err, res)
		}
		return res.Stdout
	}
	turn := func() string {
		t.Helper()
		res, err := ca.Commands.ExecWait(ctx, sb.SandboxID, client.ExecRequest{Cmd: []string{"true"}, Turn: true})
		if err != nil || res.SnapshotID == "" {
			t.Fatalf("turn: %v %+v", err, res)
		}
		return res.SnapshotID
	}
	run(ca, sb.SandboxID, turnCmd(1)+` && ln -s /etc/shadow /workspace/out && chmod 4750 /workspace/src && chown 1234:5678 /workspace/log.txt`)
	t1 := turn()
	manifest1 := run(ca, sb.SandboxID, manifestCmd)
	run(ca, sb.SandboxID, turnCmd(2))
	t2 := turn()

	if _, err := ca.Snapshots.Export(ctx, t2, t1); client.StatusCode(err) != 501 {
		t.Errorf("export against a base on dir storage: %v, want 501", err)
	}
	full := export(t, ca, t1, "")
	if !bytes.Contains(full[:4096], []byte(`"format":"tar"`)) {
		t.Fatalf("the bundle's header does not say tar: %q", full[:200])
	}
	refused := func(what string, bundle []byte, wantMsg string) {
		t.Helper()
		_, err := cb.Snapshots.Import(ctx, bytes.NewReader(bundle), false)
		if code := client.StatusCode(err); code != 400 || !strings.Contains(fmt.Sprint(err), wantMsg) {
			t.Errorf("%s: %v (status %d), want 400 saying %q", what, err, code, wantMsg)
		}
		if _, err := cb.Snapshots.Get(ctx, t1); client.StatusCode(err) != 404 {
			t.Errorf("%s: the snapshot is recorded: %v", what, err)
		}
		assertDirEntries(t, b, nil)
	}
	flipped := bytes.Clone(full)
	flipped[len(flipped)-2] ^= 1
	refused("flipped trailer byte", flipped, "SHA-256")
	flipped = bytes.Clone(full)
	flipped[len(flipped)/2] ^= 1
	refused("flipped body byte", flipped, "")
	refused("truncated", full[:len(full)*2/3], "truncated")
	refused("newer format", bytes.Replace(full, []byte(`"version":4`), []byte(`"version":9`), 1), "newer")

	for range 2 {
		s, err := cb.Snapshots.Import(ctx, bytes.NewReader(full), false)
		if err != nil || s.SnapshotID != t1 || s.State != "ready" {
			t.Fatalf("import: %+v, %v", s, err)
		}
	}
	if list, _, err := cb.Snapshots.List(ctx, client.SnapshotListOptions{}); err != nil || len(list) != 1 {
		t.Fatalf("B's snapshots after importing twice: %+v, %v", list, err)
	}
	assertDirEntries(t, b, []string{t1})
	if _, err := cb.Snapshots.Import(ctx, bytes.NewReader(export(t, ca, t2, "")), false); err != nil {
		t.Fatalf("import turn 2 whole: %v", err)
	}

	fork, err := cb.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: t1})
	if err != nil {
		t.Fatalf("create from the import on B: %v", err)
	}
	if got := run(cb, fork.SandboxID, manifestCmd); got != manifest1 {
		t.Errorf("sandbox from %s on B:\n%s\nwant (A's):\n%s", t1, got, manifest1)
	}
	if got := run(cb, fork.SandboxID, "readlink /workspace/out; stat -c '%a %u:%g' /workspace/src /workspace/log.txt"); got != "/etc/shadow\n4750 0:0\n644 1234:5678\n" {
		t.Errorf("symlink, modes and owners on B: %q", got)
	}
	forks, err := cb.Snapshots.Fork(ctx, fork.SandboxID, client.ForkRequest{SnapshotID: t1})
	if err != nil || len(forks) != 1 || forks[0].Error != nil {
		t.Errorf("fork of the import on B: %+v, %v", forks, err)
	}
	lin, err := cb.Snapshots.Lineage(ctx, fork.SandboxID)
	hasImport := slices.ContainsFunc(lin.Nodes, func(n client.LineageNode) bool { return n.ID == t1 })
	if err != nil || lin.Family != sb.SandboxID || lin.Template != "bb" || !hasImport {
		t.Errorf("lineage of the sandbox made from the import on B: %+v, %v (want family %s from bb, with %s)", lin, err, sb.SandboxID, t1)
	}
	d, err := cb.Snapshots.Diff(ctx, t1, t2, false)
	if err != nil || len(d.Changes) == 0 {
		t.Errorf("diff of two imports on B: %+v, %v", d, err)
	}
}

// assertDirEntries checks that the dir pool's snapshot kind holds exactly
// the volumes want (no temporaries, markers aside).
func assertDirEntries(t *testing.T, d *daemon, want []string) {
	t.Helper()
	got, _ := filepath.Glob(filepath.Join(d.dataDir, "volumes", "snapshots", "*"))
	var names []string
	for _, p := range got {
		if n := filepath.Base(p); !strings.HasPrefix(n, ".") {
			names = append(names, n)
		}
	}
	hidden, _ := filepath.Glob(filepath.Join(d.dataDir, "volumes", "snapshots", ".tmp-*"))
	if strings.Join(names, ",") != strings.Join(want, ",") || len(hidden) > 0 {
		t.Errorf("snapshot volumes on %s: %v (temporaries %v), want %v", d.dataDir, names, hidden, want)
	}
}
