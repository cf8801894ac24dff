package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/warrenhq/warren/client"
)

// previousReleaseFile names the commit of the previous release, one line:
// the data directory it writes is what an upgrade to the binaries under
// test must open. Bump it when a release is cut.
const previousReleaseFile = "testdata/previous-release"

// releaseBinaries are what `make build` puts in bin/, and all that a data
// directory's daemon runs.
var releaseBinaries = []string{"warren", "warren-agent", "warren-gvisor-init"}

// TestUpgrade is an upgrade in place: the previous release's daemon makes a
// data directory (a sandbox with a file, a turn and a named snapshot) and
// stops, its sandbox still running as sandboxes do across restarts; the
// daemon under test then opens that directory and must carry on with all of
// it — the sandbox (still served by the old release's agent), its
// snapshots, a rollback, a fork and a new sandbox.
func TestUpgrade(t *testing.T) {
	t.Parallel()
	oldBin := previousRelease(t)
	d := newDaemon(t)
	newBin := d.bin
	d.bin = oldBin // the old release's daemon and CLI
	d.start()
	d.mustCLI("template", "build", "bb", "--busybox", "--data-dir", d.dataDir)
	id := strings.TrimSpace(d.mustCLI("sandbox", "create", "--template", "bb", "--timeout", "600"))
	d.mustCLI("exec", id, "--", "sh", "-c", "echo at-turn > /workspace/f")
	turn := strings.TrimSpace(d.mustCLI("turn", id))
	d.mustCLI("exec", id, "--", "sh", "-c", "echo at-named > /workspace/f")
	named := strings.TrimSpace(d.mustCLI("snapshot", "create", id, "--name", "before-upgrade"))
	d.mustCLI("exec", id, "--", "sh", "-c", "echo live > /workspace/f")
	pid := initPID(t, d.dataDir, id)

	d.stop(syscall.SIGTERM)
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("the sandbox's PID 1 (%d) did not outlive the old daemon: %v", pid, err)
	}
	d.bin = newBin
	d.start()
	c := d.client()
	ctx := ctxT(t, 3*time.Minute)

	listed, _, err := c.Sandboxes.List(ctx, client.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(listed, func(s client.ListedSandbox) bool { return s.SandboxID == id })
	if i < 0 || listed[i].State != "running" {
		t.Fatalf("the old release's sandbox %s after the upgrade: listed %+v", id, listed)
	}
	if got := d.mustCLI("exec", id, "--", "cat", "/workspace/f"); got != "live\n" {
		t.Fatalf("the old sandbox's file after the upgrade: %q, want live", got)
	}
	snaps, _, err := c.Snapshots.List(ctx, client.SnapshotListOptions{SandboxID: id})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{turn, named} {
		if !slices.ContainsFunc(snaps, func(s client.Snapshot) bool { return s.SnapshotID == want }) {
			t.Fatalf("snapshot %s of the old release is not listed after the upgrade: %+v", want, snaps)
		}
	}

	if _, err := c.Snapshots.Rollback(ctx, id, client.RollbackRequest{SnapshotID: turn}); err != nil {
		t.Fatalf("rollback to the old release's turn: %v", err)
	}
	if got := d.mustCLI("exec", id, "--", "cat", "/workspace/f"); got != "at-turn\n" {
		t.Fatalf("after the rollback to the old turn: %q, want at-turn", got)
	}
	forks, err := c.Snapshots.Fork(ctx, id, client.ForkRequest{SnapshotID: named})
	if err != nil || len(forks) != 1 || forks[0].Sandbox == nil {
		t.Fatalf("fork of the old release's named snapshot: %+v %v", forks, err)
	}
	if got := d.mustCLI("exec", forks[0].Sandbox.SandboxID, "--", "cat", "/workspace/f"); got != "at-named\n" {
		t.Fatalf("the fork of the old named snapshot reads %q, want at-named", got)
	}
	fresh, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb"})
	if err != nil {
		t.Fatalf("a new sandbox in the upgraded data directory: %v", err)
	}
	if got := d.mustCLI("exec", fresh.SandboxID, "--", "echo", "new"); got != "new\n" {
		t.Fatalf("exec in a new sandbox after the upgrade: %q", got)
	}
}

// previousRelease returns the directory holding the previous release's
// binaries. They are built once from this clone's own git history (the
// commit previousReleaseFile names) and kept in
// <cache>/previous-release/<commit>/. A clone without that commit (a
// shallow one) fails the test: the upgrade is then untested, not fine.
func previousRelease(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(previousReleaseFile)
	if err != nil {
		t.Fatal(err)
	}
	commit := strings.TrimSpace(string(b))
	if !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(commit) {
		t.Fatalf("%s holds %q, not a full commit hash", previousReleaseFile, commit)
	}
	dir := filepath.Join(cacheDir(), "previous-release", commit)
	if haveBinaries(dir) {
		return dir
	}
	if out, err := exec.Command("git", "cat-file", "-e", commit+"^{commit}").CombinedOutput(); err != nil {
		shallow, _ := exec.Command("git", "rev-parse", "--is-shallow-repository").Output()
		t.Fatalf("the previous release %s is not in this clone's git history (shallow clone: %s; git: %v %s): "+
			"the upgrade test builds it from there; fetch it with `git fetch --unshallow` (or clone without --depth)",
			commit, strings.TrimSpace(string(shallow)), err, strings.TrimSpace(string(out)))
	}
	t.Logf("building the previous release %s into %s (once)", commit, dir)
	if err := buildRelease(t, commit, dir); err != nil {
		t.Fatalf("build the previous release %s: %v", commit, err)
	}
	return dir
}

func haveBinaries(dir string) bool {
	for _, b := range releaseBinaries {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return false
		}
	}
	return true
}

// buildRelease exports commit from git into a scratch directory outside
// the clone and builds it with the flags of the Makefile's build target,
// into a directory beside dir first and then renamed into place, so that an
// interrupted build leaves nothing a later run would take for finished.
func buildRelease(t *testing.T, commit, dir string) error {
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return fmt.Errorf("find the clone's top directory: %w", err)
	}
	src := t.TempDir()
	tarball := filepath.Join(src, "src.tar")
	// From the top: run in a subdirectory, git archive takes only that one.
	archive := exec.Command("git", "archive", "--format=tar", "-o", tarball, commit)
	archive.Dir = strings.TrimSpace(string(top))
	if out, err := archive.CombinedOutput(); err != nil {
		return fmt.Errorf("git archive: %v\n%s", err, out)
	}
	if out, err := exec.Command("tar", "-xf", tarball, "-C", src).CombinedOutput(); err != nil {
		return fmt.Errorf("untar: %v\n%s", err, out)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), filepath.Base(dir)+".tmp-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	// As the Makefile's build target: cgo and the seccomp tag for warren
	// (libcontainer), static binaries for the agent module and gvisor-init.
	steps := []struct {
		dir, cgo string
		args     []string
	}{
		{".", "1", []string{"build", "-tags", "seccomp", "-o", filepath.Join(tmp, "warren"), "./cmd/warren"}},
		{"agent", "0", []string{"build", "-trimpath", "-ldflags=-s -w", "-o", filepath.Join(tmp, "warren-agent"), "./cmd/warren-agent"}},
		{".", "0", []string{"build", "-trimpath", "-ldflags=-s -w", "-o", filepath.Join(tmp, "warren-gvisor-init"), "./internal/runtime/gvisor/gvisorinit"}},
	}
	for _, s := range steps {
		cmd := exec.Command("go", s.args...)
		cmd.Dir = filepath.Join(src, s.dir)
		cmd.Env = append(os.Environ(), "CGO_ENABLED="+s.cgo)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go %s (in %s): %v\n%s", strings.Join(s.args, " "), s.dir, err, out)
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		if haveBinaries(dir) {
			return nil // another run built it meanwhile
		}
		return err
	}
	return nil
}
