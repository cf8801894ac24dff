package e2e

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/warrenhq/warren/client"
)

// usernsBase is the --userns-base these tests give the daemon, so that the
// ids they expect are their own.
const usernsBase = 3_100_000_000

// TestUserNS: by default a sandbox's processes run as its range's uid
// on the host; a file made by root inside is root's inside and 0 on disk
// (the host's view of the subvolume), the mapped uid through the sandbox's
// idmapped root; the files API writes with the owners a sandbox without a
// namespace gets; snapshot, fork (a range of its own), rollback and a
// daemon restart keep all of it, and so does a restart with
// --userns=false, whose new sandboxes have no namespace.
func TestUserNS(t *testing.T) {
	t.Parallel()
	// No --userns: the namespaced mode is the default.
	d := busyboxDaemon(t, "--userns-base", strconv.Itoa(usernsBase))
	c := d.client()
	ctx := ctxT(t, 3*time.Minute)
	sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb"})
	if err != nil {
		t.Fatal(err)
	}
	id := sb.SandboxID
	t.Cleanup(func() { c.Sandboxes.Delete(context.Background(), id) })

	checkHealthUserNS(t, ctx, c, "on (native)")
	first := hostUIDs(t, initPID(t, d.dataDir, id))
	if first < usernsBase || (first-usernsBase)%65536 != 0 {
		t.Fatalf("PID 1 runs as host uid %d; want a range start at or above %d", first, usernsBase)
	}
	if got := strings.TrimSpace(execAs(t, ctx, c, id, "root", "id -u; echo made > /root-made; stat -c %u /root-made").Stdout); got != "0\n0" {
		t.Errorf("root inside: %q; want uid 0 owning its file", got)
	}
	// The agent's children (the command above) are mapped too.
	if out := execAs(t, ctx, c, id, "root", "sleep 30 >/dev/null 2>&1 & echo $!").Stdout; out != "" {
		pid := sandboxPIDOnHost(t, initPID(t, d.dataDir, id), "sleep")
		if got := hostUIDs(t, pid); got != first {
			t.Errorf("a command's process runs as host uid %d; want %d", got, first)
		}
	}
	vol := filepath.Join(d.dataDir, "pool", "volumes", "sandboxes", id)
	rootFile := findFile(t, vol, "root-made")
	if uid := ownerOf(t, rootFile); uid != 0 {
		t.Errorf("on disk %s is owned by %d; want 0 (files keep their in-sandbox owner)", rootFile, uid)
	}
	mapped := idmappedRoot(t, id)
	if uid := ownerOf(t, filepath.Join(mapped, "root-made")); uid != first {
		t.Errorf("through the idmapped root, root-made is owned by %d; want %d", uid, first)
	}

	// The files API: a write as the sandbox's user and as root.
	for _, user := range []string{"user", "root"} {
		path := "/tmp/api-" + user
		if _, err := c.Files.Write(ctx, id, path, strings.NewReader("x"), 0o644, user); err != nil {
			t.Fatalf("write %s as %s: %v", path, user, err)
		}
		got := strings.TrimSpace(execAs(t, ctx, c, id, "root", "stat -c %u "+path+"; id -u "+user).Stdout)
		if f := strings.Fields(got); len(f) != 2 || f[0] != f[1] {
			t.Errorf("file written as %s through the API: owner, %s's uid = %q; want equal", user, user, got)
		}
		if _, err := c.Files.Write(ctx, id, path, strings.NewReader("y"), 0o644, user); err != nil {
			t.Errorf("overwrite %s as %s: %v", path, user, err)
		}
	}
	if got := strings.TrimSpace(execAs(t, ctx, c, id, "user", "echo hi > /tmp/api-user && cat /tmp/api-user").Stdout); got != "hi" {
		t.Errorf("the user cannot write its own API-written file: %q", got)
	}

	// Snapshot, fork, rollback.
	snap, err := c.Snapshots.Turn(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	execAs(t, ctx, c, id, "root", "rm /root-made; echo later > /later")
	forks, err := c.Snapshots.Fork(ctx, id, client.ForkRequest{SnapshotID: snap.SnapshotID})
	if err != nil || len(forks) != 1 || forks[0].Sandbox == nil {
		t.Fatalf("fork: %+v %v", forks, err)
	}
	fork := forks[0].Sandbox.SandboxID
	t.Cleanup(func() { c.Sandboxes.Delete(context.Background(), fork) })
	if got := hostUIDs(t, initPID(t, d.dataDir, fork)); got == first || got < usernsBase {
		t.Errorf("the fork runs as host uid %d; want a range of its own (parent %d)", got, first)
	}
	if got := strings.TrimSpace(execAs(t, ctx, c, fork, "root", "stat -c %u /root-made; touch /f && stat -c %u /f").Stdout); got != "0\n0" {
		t.Errorf("fork: owners %q; want root's", got)
	}
	if _, err := c.Snapshots.Rollback(ctx, id, client.RollbackRequest{SnapshotID: snap.SnapshotID}); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(execAs(t, ctx, c, id, "root", "cat /root-made; ls /later 2>&1 >/dev/null | wc -l").Stdout); got != "made\n1" {
		t.Errorf("after rollback: %q; want the snapshot's files", got)
	}
	if got := hostUIDs(t, initPID(t, d.dataDir, id)); got != first {
		t.Errorf("after rollback PID 1 runs as %d; want the sandbox's range %d still", got, first)
	}

	// A daemon restart: the sandbox keeps running as it was, and a new
	// start (after a pause that keeps only files) takes the same range.
	d.stop(syscall.SIGKILL)
	d.start()
	if got := strings.TrimSpace(execAs(t, ctx, c, id, "root", "id -u; cat /root-made").Stdout); got != "0\nmade" {
		t.Errorf("after a daemon restart: %q", got)
	}
	if got := hostUIDs(t, initPID(t, d.dataDir, id)); got != first {
		t.Errorf("after a daemon restart PID 1 runs as %d; want %d", got, first)
	}
	// Turned off: the namespaced sandbox is recovered as it is, and a new
	// one has no namespace.
	d.stop(syscall.SIGKILL)
	d.args = []string{"--userns=false", "--userns-base", strconv.Itoa(usernsBase)}
	d.start()
	if got := strings.TrimSpace(execAs(t, ctx, c, id, "root", "id -u").Stdout); got != "0" {
		t.Errorf("after a restart without --userns: %q", got)
	}
	checkHealthUserNS(t, ctx, c, "off: turned off (--userns=false)")
	plain, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb"})
	if err != nil {
		t.Fatal(err)
	}
	if got := hostUIDs(t, initPID(t, d.dataDir, plain.SandboxID)); got != 0 {
		t.Errorf("a sandbox made without --userns runs as host uid %d; want 0", got)
	}
	rangeAtNextStart(t, ctx, d, c, plain.SandboxID)
	if err := c.Sandboxes.Delete(ctx, plain.SandboxID); err != nil {
		t.Fatal(err)
	}
	if err := c.Sandboxes.Delete(ctx, fork); err != nil {
		t.Fatal(err)
	}
	if err := c.Sandboxes.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(mapped); !os.IsNotExist(err) {
		t.Errorf("the idmapped root %s outlived its sandbox: %v", mapped, err)
	}
}

// rangeAtNextStart: a sandbox made without a user namespace (with
// --userns=false, or by a release without them) keeps running as it is
// when the daemon restarts in the default mode, and its next start (here a
// rollback) takes a range, whose root's uid its agent may then dial from.
func rangeAtNextStart(t *testing.T, ctx context.Context, d *daemon, c *client.Client, id string) {
	t.Helper()
	execAs(t, ctx, c, id, "root", "echo before > /plain-file")
	snap, err := c.Snapshots.Turn(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	d.stop(syscall.SIGKILL)
	d.args = []string{"--userns-base", strconv.Itoa(usernsBase)}
	d.start()
	if got := hostUIDs(t, initPID(t, d.dataDir, id)); got != 0 {
		t.Errorf("after a restart with user namespaces, the running plain sandbox runs as %d; want 0 still", got)
	}
	execAs(t, ctx, c, id, "root", "echo after > /plain-file")
	if _, err := c.Snapshots.Rollback(ctx, id, client.RollbackRequest{SnapshotID: snap.SnapshotID}); err != nil {
		t.Fatalf("rollback of a sandbox that had no user namespace: %v", err)
	}
	if got := hostUIDs(t, initPID(t, d.dataDir, id)); got < usernsBase {
		t.Errorf("after its rollback the plain sandbox runs as host uid %d; want a range", got)
	}
	if got := strings.TrimSpace(execAs(t, ctx, c, id, "root", "id -u; cat /plain-file; stat -c %u /plain-file").Stdout); got != "0\nbefore\n0" {
		t.Errorf("after its rollback into a namespace: %q; want root owning the snapshot's file", got)
	}
}

// hostUIDs returns the uid a host process runs as, checking that its
// real, effective, saved and filesystem uids and gids are all that one.
func hostUIDs(t *testing.T, pid int) uint32 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	var uid uint64
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ":")
		if k != "Uid" && k != "Gid" {
			continue
		}
		f := strings.Fields(v)
		for _, x := range f {
			if x != f[0] {
				t.Errorf("pid %d: %s line %q: the ids differ", pid, k, v)
			}
		}
		n, _ := strconv.ParseUint(f[0], 10, 32)
		if k == "Uid" {
			uid = n
		} else if n != uid {
			t.Errorf("pid %d: gid %d, uid %d; want the same", pid, n, uid)
		}
	}
	return uint32(uid)
}

// sandboxPIDOnHost finds, among the host's processes, one named comm
// whose pid namespace is init's.
func sandboxPIDOnHost(t *testing.T, init int, comm string) int {
	t.Helper()
	ns, err := os.Readlink("/proc/" + strconv.Itoa(init) + "/ns/pid")
	if err != nil {
		t.Fatal(err)
	}
	var found int
	waitFor(t, 10*time.Second, comm+" in the sandbox", func() bool {
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			c, _ := os.ReadFile("/proc/" + e.Name() + "/comm")
			n, _ := os.Readlink("/proc/" + e.Name() + "/ns/pid")
			if strings.TrimSpace(string(c)) == comm && n == ns {
				found = pid
				return true
			}
		}
		return false
	})
	return found
}

// idmappedRoot is the host path of sandbox id's idmapped root mount.
func idmappedRoot(t *testing.T, id string) string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && strings.HasPrefix(fields[4], "/run/warren-userns/") && strings.HasSuffix(fields[4], "/"+id+"/root") {
			return fields[4]
		}
	}
	t.Fatalf("no idmapped root mount for %s in /proc/self/mountinfo", id)
	return ""
}

// findFile finds name under a sandbox volume (the storage backend may
// keep the tree one level down).
func findFile(t *testing.T, vol, name string) string {
	t.Helper()
	for _, p := range []string{filepath.Join(vol, name), filepath.Join(vol, "rootfs", name)} {
		if _, err := os.Lstat(p); err == nil {
			return p
		}
	}
	matches, _ := filepath.Glob(filepath.Join(vol, "*", name))
	if len(matches) == 1 {
		return matches[0]
	}
	t.Fatalf("%s not found in %s", name, vol)
	return ""
}

func ownerOf(t *testing.T, path string) uint32 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Uid
}

// checkHealthUserNS checks what GET /health says of the native runtime's
// user namespaces, in `warren health`'s words.
func checkHealthUserNS(t *testing.T, ctx context.Context, c *client.Client, want string) {
	t.Helper()
	h, err := c.Meta.Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if h.Capabilities == nil {
		t.Fatal("GET /health has no capabilities")
	}
	for _, r := range h.Capabilities.Runtimes {
		if r.Name != "native" {
			continue
		}
		got := "off: " + r.UserNSOff
		if r.UserNS {
			got = "on (native)"
		}
		if got != want {
			t.Errorf("GET /health: native user namespaces %q; want %q", got, want)
		}
		return
	}
	t.Errorf("GET /health lists no native runtime: %+v", h.Capabilities)
}
