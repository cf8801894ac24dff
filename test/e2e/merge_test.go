package e2e

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/client"
)

// mergeFamily is a parent sandbox and its forks, on one daemon.
type mergeFamily struct {
	t      *testing.T
	ctx    context.Context
	c      *client.Client
	parent string
	forks  []string
}

// newMergeFamily makes a busybox sandbox holding files, then n forks of it.
func newMergeFamily(t *testing.T, d *daemon, ctx context.Context, files map[string]string, n int) *mergeFamily {
	t.Helper()
	c := d.client()
	sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Sandboxes.Delete(context.Background(), sb.SandboxID) })
	f := &mergeFamily{t: t, ctx: ctx, c: c, parent: sb.SandboxID}
	for p, content := range files {
		f.write(f.parent, p, content)
	}
	res, err := c.Snapshots.Fork(ctx, f.parent, client.ForkRequest{Count: n})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Sandbox == nil {
			t.Fatalf("fork: %+v", r.Error)
		}
		f.forks = append(f.forks, r.Sandbox.SandboxID)
		id := r.Sandbox.SandboxID
		t.Cleanup(func() { _ = c.Sandboxes.Delete(context.Background(), id) })
	}
	return f
}

func (f *mergeFamily) write(id, p, content string) {
	f.t.Helper()
	if _, err := f.c.Files.Write(f.ctx, id, p, strings.NewReader(content), 0o644, "root"); err != nil {
		f.t.Fatalf("write %s in %s: %v", p, id, err)
	}
}

// sh runs a script as root in sandbox id and returns its stdout.
func (f *mergeFamily) sh(id, script string) string {
	f.t.Helper()
	req := sh(script)
	req.User = "root"
	res, err := f.c.Commands.ExecWait(f.ctx, id, req)
	if err != nil || res.ExitCode != 0 {
		f.t.Fatalf("%s in %s: %v %+v", script, id, err, res)
	}
	return res.Stdout
}

func (f *mergeFamily) read(id, p string) string {
	f.t.Helper()
	rc, err := f.c.Files.Read(f.ctx, id, p)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	defer rc.Close()
	b, _ := io.ReadAll(rc)
	return string(b)
}

func (f *mergeFamily) merge(into string, req client.MergeRequest) (client.MergeResult, map[string]client.MergeEntry) {
	f.t.Helper()
	res, err := f.c.Snapshots.Merge(f.ctx, into, req)
	if err != nil {
		f.t.Fatalf("merge %+v into %s: %v", req, into, err)
	}
	byPath := map[string]client.MergeEntry{}
	for _, e := range res.Entries {
		byPath[e.Path] = e
	}
	return res, byPath
}

func (f *mergeFamily) wantFile(id, p, want string) {
	f.t.Helper()
	if got := f.read(id, p); got != want {
		f.t.Errorf("%s in %s holds %q, want %q", p, id, got, want)
	}
}

func (f *mergeFamily) wantOutcome(entries map[string]client.MergeEntry, p, outcome string) {
	f.t.Helper()
	if e := entries[p]; e.Outcome != outcome {
		f.t.Errorf("%s: %+v, want outcome %s", p, e, outcome)
	}
}

const twoFuncs = "def one():\n    return 1\n\n\n\ndef two():\n    return 2\n"

// Two forks edit different functions of one file and different files:
// both merge cleanly, byte for byte; a rollback to the turn before the
// second merge restores the tree after the first exactly.
func TestMergeClean(t *testing.T) {
	t.Parallel()
	d := busyboxDaemon(t)
	ctx := ctxT(t, 5*time.Minute)
	f := newMergeFamily(t, d, ctx, map[string]string{"/w/code.py": twoFuncs, "/w/b.txt": "b\n"}, 2)
	a, b := f.forks[0], f.forks[1]
	f.write(a, "/w/code.py", strings.Replace(twoFuncs, "return 1", "return 'one'", 1))
	f.write(a, "/w/new-a.txt", "from a\n")
	f.write(b, "/w/code.py", strings.Replace(twoFuncs, "return 2", "return 'two'", 1))
	f.write(b, "/w/b.txt", "b changed\n")

	first, entries := f.merge(f.parent, client.MergeRequest{From: a})
	if first.Conflicts != 0 || first.BeforeSnapshotID == "" || first.AfterSnapshotID == "" {
		t.Fatalf("first merge: %+v", first)
	}
	f.wantOutcome(entries, "/w/code.py", "taken")
	f.wantOutcome(entries, "/w/new-a.txt", "taken")
	afterFirst := f.sh(f.parent, "cd /w && md5sum * | sort")

	second, entries := f.merge(f.parent, client.MergeRequest{From: b})
	if second.Conflicts != 0 {
		t.Fatalf("second merge: %+v", second)
	}
	f.wantOutcome(entries, "/w/code.py", "merged")
	f.wantOutcome(entries, "/w/b.txt", "taken")
	both := strings.Replace(strings.Replace(twoFuncs, "return 1", "return 'one'", 1), "return 2", "return 'two'", 1)
	f.wantFile(f.parent, "/w/code.py", both)
	f.wantFile(f.parent, "/w/b.txt", "b changed\n")
	f.wantFile(f.parent, "/w/new-a.txt", "from a\n")

	lin, err := f.c.Snapshots.Lineage(ctx, f.parent)
	if err != nil {
		t.Fatal(err)
	}
	merged := 0
	for _, e := range lin.Edges {
		if e.Kind == "merged-from" && e.From == f.parent {
			merged++
		}
	}
	if merged != 2 {
		t.Errorf("%d merged-from edges, want 2", merged)
	}

	if _, err := f.c.Snapshots.Rollback(ctx, f.parent, client.RollbackRequest{SnapshotID: second.BeforeSnapshotID}); err != nil {
		t.Fatal(err)
	}
	if got := f.sh(f.parent, "cd /w && md5sum * | sort"); got != afterFirst {
		t.Errorf("after the rollback to the turn before the merge:\n%s\nwant\n%s", got, afterFirst)
	}
}

// Conflicts: the same line, deletion against modification, a binary file,
// under every strategy; a rename against an edit merges the edit into the
// renamed file; a symlink out of the sandbox is merged as a symlink.
func TestMergeConflicts(t *testing.T) {
	t.Parallel()
	d := busyboxDaemon(t)
	ctx := ctxT(t, 5*time.Minute)
	f := newMergeFamily(t, d, ctx, map[string]string{"/w/line.txt": "a\nb\nc\n", "/w/del.txt": "d\n",
		"/w/bin": "\x00base", "/w/r.txt": "1\n2\n3\n"}, 1)
	fork := f.forks[0]
	f.write(f.parent, "/w/line.txt", "a\nours\nc\n")
	f.write(fork, "/w/line.txt", "a\ntheirs\nc\n")
	f.sh(f.parent, "rm /w/del.txt")
	f.write(fork, "/w/del.txt", "d changed\n")
	f.write(f.parent, "/w/bin", "\x00ours")
	f.write(fork, "/w/bin", "\x00theirs")
	f.sh(f.parent, "mv /w/r.txt /w/r2.txt")
	f.write(fork, "/w/r.txt", "1\n2 edited\n3\n")
	f.sh(fork, "ln -s /etc/../../../../etc/shadow /w/out && mkdir -p /w/dir && ln -s / /w/dir/root")

	dry, _ := f.merge(f.parent, client.MergeRequest{From: fork, DryRun: true})
	if dry.BeforeSnapshotID != "" || f.read(f.parent, "/w/line.txt") != "a\nours\nc\n" {
		t.Fatalf("a dry run wrote: %+v", dry)
	}
	res, entries := f.merge(f.parent, client.MergeRequest{From: fork})
	for _, p := range []string{"/w/line.txt", "/w/del.txt", "/w/bin"} {
		f.wantOutcome(entries, p, "conflict")
	}
	// Renamed here, edited there: the edit follows the rename.
	f.wantOutcome(entries, "/w/r2.txt", "merged")
	f.wantFile(f.parent, "/w/r2.txt", "1\n2 edited\n3\n")
	if got := f.read(f.parent, "/w/r.txt"); !strings.HasPrefix(got, "<") {
		t.Errorf("the renamed file's old path came back: %q", got)
	}
	f.wantOutcome(entries, "/w/out", "taken")
	f.wantFile(f.parent, "/w/line.txt", "a\n<<<<<<< ours\nours\n=======\ntheirs\n>>>>>>> theirs\nc\n")
	f.wantFile(f.parent, "/w/bin", "\x00ours")
	if got := f.sh(f.parent, "readlink /w/out; readlink /w/dir/root"); got != "/etc/../../../../etc/shadow\n/\n" {
		t.Errorf("symlinks merged as %q", got)
	}
	for strategy, want := range map[string][2]string{
		"ours":   {"a\nours\nc\n", "\x00ours"},
		"theirs": {"a\ntheirs\nc\n", "\x00theirs"},
		"union":  {"a\nours\ntheirs\nc\n", "\x00ours"},
	} {
		if _, err := f.c.Snapshots.Rollback(ctx, f.parent, client.RollbackRequest{SnapshotID: res.BeforeSnapshotID}); err != nil {
			t.Fatal(err)
		}
		_, entries := f.merge(f.parent, client.MergeRequest{From: fork, Strategy: strategy})
		f.wantOutcome(entries, "/w/line.txt", "conflict")
		f.wantFile(f.parent, "/w/line.txt", want[0])
		f.wantFile(f.parent, "/w/bin", want[1])
		wantDel := "d changed\n"
		if strategy == "ours" {
			wantDel = "<no such file>"
		}
		if got := f.read(f.parent, "/w/del.txt"); got != wantDel && !(strategy == "ours" && strings.HasPrefix(got, "<")) {
			t.Errorf("%s: del.txt holds %q", strategy, got)
		}
	}
}

// Cherry-pick and bad input.
func TestMergeCherryPickAndBadInput(t *testing.T) {
	t.Parallel()
	d := busyboxDaemon(t)
	ctx := ctxT(t, 5*time.Minute)
	f := newMergeFamily(t, d, ctx, map[string]string{"/w/x": "x\n"}, 1)
	fork := f.forks[0]
	f.write(fork, "/w/x", "x from fork\n")
	f.write(fork, "/w/y/z", "z\n")
	f.write(fork, "/w/not-picked", "n\n")
	_, entries := f.merge(f.parent, client.MergeRequest{From: fork, Paths: []string{"/w/x", "w/y"}})
	f.wantOutcome(entries, "/w/x", "taken")
	f.wantFile(f.parent, "/w/x", "x from fork\n")
	f.wantFile(f.parent, "/w/y/z", "z\n")
	if got := f.read(f.parent, "/w/not-picked"); !strings.HasPrefix(got, "<") {
		t.Errorf("a path not picked was copied: %q", got)
	}

	other, err := f.c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.c.Sandboxes.Delete(context.Background(), other.SandboxID) })
	before := f.sh(f.parent, "cd /w && find . -type f | sort | xargs md5sum")
	for name, req := range map[string]client.MergeRequest{
		"unrelated family": {From: other.SandboxID},
		"dotdot path":      {From: fork, Paths: []string{"w/../../etc/passwd"}},
		"unknown strategy": {From: fork, Strategy: "octopus"},
		"no from":          {},
		"itself":           {From: f.parent},
		"unknown snapshot": {From: fork, Base: "nosuchsnapshot"},
	} {
		_, err := f.c.Snapshots.Merge(ctx, f.parent, req)
		if code := client.StatusCode(err); code < 400 || code > 499 {
			t.Errorf("%s: %v, want a 4xx", name, err)
		}
	}
	if _, err := f.c.Snapshots.ForksSummary(ctx, f.parent, 7); err == nil {
		t.Error("threshold 7 was accepted")
	}
	// From a snapshot of the fork: the base is found through the
	// snapshot's sandbox. And through the CLI.
	snap, err := f.c.Snapshots.Create(ctx, fork, client.NewSnapshot{Name: "fork-state"})
	if err != nil {
		t.Fatal(err)
	}
	_, entries = f.merge(f.parent, client.MergeRequest{From: snap.SnapshotID, DryRun: true})
	f.wantOutcome(entries, "/w/not-picked", "taken")
	if out := d.mustCLI("merge", f.parent, "--from", fork, "--dry-run"); !strings.Contains(out, "/w/not-picked") || !strings.Contains(out, "would merge") {
		t.Errorf("warren merge --dry-run printed:\n%s", out)
	}
	if _, _, code := d.cli("", "merge", f.parent, "--from", fork, "--strategy", "octopus"); code == 0 {
		t.Error("warren merge --strategy octopus succeeded")
	}
	if after := f.sh(f.parent, "cd /w && find . -type f | sort | xargs md5sum"); after != before {
		t.Errorf("refused merges changed the tree:\n%s\nwant\n%s", after, before)
	}
	// A command running: 409 unless forced.
	errc := make(chan error, 1)
	sleepCtx, stopSleep := context.WithCancel(ctx)
	go func() {
		_, err := f.c.Commands.ExecWait(sleepCtx, f.parent, client.ExecRequest{Cmd: []string{"sleep", "60"}})
		errc <- err
	}()
	waitFor(t, 20*time.Second, "the command to start", func() bool {
		res, err := f.c.Commands.ExecWait(ctx, f.parent, sh("ps | grep -q '[s]leep 60'"))
		return err == nil && res.ExitCode == 0
	})
	_, err = f.c.Snapshots.Merge(ctx, f.parent, client.MergeRequest{From: fork})
	if client.StatusCode(err) != 409 || !strings.Contains(err.Error(), "--force") {
		t.Errorf("merge while a command runs: %v, want 409 naming --force", err)
	}
	if _, err := f.c.Snapshots.Merge(ctx, f.parent, client.MergeRequest{From: fork, Force: true}); err != nil {
		t.Errorf("forced merge: %v", err)
	}
	stopSleep()
	<-errc
}

// The verdicts of five forks: unchanged, a small clean change, a conflict,
// a huge change, most of the tree deleted.
func TestForksSummary(t *testing.T) {
	t.Parallel()
	d := busyboxDaemon(t)
	ctx := ctxT(t, 5*time.Minute)
	f := newMergeFamily(t, d, ctx, map[string]string{"/w/shared.txt": "1\n2\n3\n"}, 5)
	f.write(f.parent, "/w/shared.txt", "1\nparent\n3\n")
	f.write(f.forks[1], "/w/small.txt", "small\n")
	f.write(f.forks[2], "/w/shared.txt", "1\nfork\n3\n")
	f.sh(f.forks[3], "dd if=/dev/zero of=/w/huge bs=1M count=64 2>/dev/null")
	f.sh(f.forks[4], "cd / && /bin/busybox rm -rf /bin /sbin /usr /w /etc /lib* 2>/dev/null; true")
	sum, err := f.c.Snapshots.ForksSummary(ctx, f.parent, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]client.ForkVerdict{}
	for _, v := range sum.Forks {
		got[v.SandboxID] = v
	}
	for i, want := range []string{"discard", "merge", "review", "review", "review"} {
		v := got[f.forks[i]]
		if v.Recommendation != want {
			t.Errorf("fork %d: %+v, want %s", i, v, want)
		}
		if v.Divergence < 0 || v.Divergence > 1 {
			t.Errorf("fork %d: divergence %v", i, v.Divergence)
		}
	}
	if v := got[f.forks[2]]; v.MergesCleanly || v.Conflicts == 0 {
		t.Errorf("the conflicting fork: %+v", v)
	}
	if v := got[f.forks[4]]; v.Removed == 0 || v.Divergence <= sum.Threshold {
		t.Errorf("the fork that deleted its tree: %+v", v)
	}
	if out := d.mustCLI("forks", f.parent); !strings.Contains(out, "discard") || !strings.Contains(out, "review") {
		t.Errorf("warren forks printed:\n%s", out)
	}
	fmt.Println("verdicts:", sum)
}

// A gvisor sandbox caches its root in the sentry: a merge into it is
// refused with a clear 409 and nothing written; a dry run answers.
func TestMergeGVisorRefused(t *testing.T) {
	t.Parallel()
	d := gvisorDaemon(t)
	ctx := ctxT(t, 5*time.Minute)
	c := d.client()
	sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", Runtime: "gvisor"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Sandboxes.Delete(context.Background(), sb.SandboxID) })
	f := &mergeFamily{t: t, ctx: ctx, c: c, parent: sb.SandboxID}
	f.write(f.parent, "/w/x", "x\n")
	res, err := c.Snapshots.Fork(ctx, f.parent, client.ForkRequest{})
	if err != nil || len(res) != 1 || res[0].Sandbox == nil {
		t.Fatalf("fork: %v %+v", err, res)
	}
	fork := res[0].Sandbox.SandboxID
	t.Cleanup(func() { _ = c.Sandboxes.Delete(context.Background(), fork) })
	f.write(fork, "/w/x", "x from fork\n")
	_, err = c.Snapshots.Merge(ctx, f.parent, client.MergeRequest{From: fork})
	if client.StatusCode(err) != 409 || !strings.Contains(err.Error(), "gvisor") {
		t.Errorf("merge into a gvisor sandbox: %v, want a 409 naming gvisor", err)
	}
	f.wantFile(f.parent, "/w/x", "x\n")
	_, entries := f.merge(f.parent, client.MergeRequest{From: fork, DryRun: true})
	f.wantOutcome(entries, "/w/x", "taken")
	f.wantFile(f.parent, "/w/x", "x\n")
}
