package e2e

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/runtime/runtimetest"
)

var bootIDRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// TestBootID: every start of a sandbox is a boot of its own, on both
// runtimes. Two sandboxes have different boot ids and neither is the
// host's; a pause and resume (a freeze on native, a freeze or a memory
// checkpoint on gVisor) keeps it; a cold start of the same sandbox (a
// rollback that restarts its processes) and a fork get new ones.
func TestBootID(t *testing.T) {
	t.Parallel()
	d := gvisorDaemon(t)
	c := d.client()
	host, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range []string{"native", "gvisor"} {
		t.Run(rt, func(t *testing.T) {
			ctx := ctxT(t, 3*time.Minute)
			a := createBB(t, ctx, c, rt)
			b := createBB(t, ctx, c, rt)
			idA, idB := bootID(t, ctx, c, a), bootID(t, ctx, c, b)
			if !bootIDRE.MatchString(idA) || idA == idB || idA == strings.TrimSpace(string(host)) {
				t.Fatalf("boot ids %q and %q (host %q): want two UUIDs of their own", idA, idB, strings.TrimSpace(string(host)))
			}
			if err := c.Lifecycle.Pause(ctx, a); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Lifecycle.Resume(ctx, a); err != nil {
				t.Fatal(err)
			}
			if got := bootID(t, ctx, c, a); got != idA {
				t.Errorf("after a pause and resume: boot id %q, want %q", got, idA)
			}
			if rt == "gvisor" {
				if _, err := c.Lifecycle.Hibernate(ctx, a); err != nil {
					t.Fatal(err)
				}
				if _, err := c.Lifecycle.Resume(ctx, a); err != nil {
					t.Fatal(err)
				}
				if got := bootID(t, ctx, c, a); got != idA {
					t.Errorf("after a hibernate (checkpoint) and resume (restore): boot id %q, want %q", got, idA)
				}
			}
			snap, err := c.Snapshots.Create(ctx, a, client.NewSnapshot{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.Snapshots.Rollback(ctx, a, client.RollbackRequest{SnapshotID: snap.SnapshotID, FilesOnly: true}); err != nil {
				t.Fatal(err)
			}
			rebooted := bootID(t, ctx, c, a)
			if rebooted == idA || !bootIDRE.MatchString(rebooted) {
				t.Errorf("after a rollback that restarted the processes: boot id %q (before %q), want a new one", rebooted, idA)
			}
			forks, err := c.Snapshots.Fork(ctx, a, client.ForkRequest{SnapshotID: snap.SnapshotID, FilesOnly: true})
			if err != nil || len(forks) != 1 || forks[0].Sandbox == nil {
				t.Fatalf("fork: %+v %v", forks, err)
			}
			fork := forks[0].Sandbox.SandboxID
			t.Cleanup(func() { c.Sandboxes.Delete(context.Background(), fork) })
			if got := bootID(t, ctx, c, fork); got == rebooted || got == idA {
				t.Errorf("a fork's boot id %q is its parent's", got)
			}
		})
	}
}

// TestSetuidModes: with the server's defaults a setuid-root binary raises
// the sandbox's user to root (sudo works); with --no-new-privileges
// (server) it does not, on both runtimes, and what it raises to holds no
// more than root's capabilities and seccomp filter.
func TestSetuidModes(t *testing.T) {
	t.Parallel()
	for _, nnp := range []bool{false, true} {
		t.Run(map[bool]string{false: "default", true: "no-new-privileges"}[nnp], func(t *testing.T) {
			t.Parallel()
			var args []string
			if nnp {
				args = append(args, "--no-new-privileges")
			}
			d := gvisorDaemon(t, args...)
			c := d.client()
			for _, rt := range []string{"native", "gvisor"} {
				ctx := ctxT(t, 2*time.Minute)
				id := createBB(t, ctx, c, rt)
				installSetids(t, ctx, c, id)
				asRoot := execAs(t, ctx, c, id, "root", runtimetest.StatusLines)
				raised := execAs(t, ctx, c, id, "user", "setids 0 id -u && setids 0 "+runtimetest.StatusLines)
				if nnp {
					if raised.ExitCode == 0 || !strings.Contains(raised.Stderr, "operation not permitted") {
						t.Errorf("%s, --no-new-privileges: a setuid-root binary raised the user: %+v", rt, raised)
					}
					if !strings.Contains(asRoot.Stdout, "NoNewPrivs:\t1") {
						t.Errorf("%s, --no-new-privileges: %q", rt, asRoot.Stdout)
					}
					continue
				}
				if raised.ExitCode != 0 || !strings.HasPrefix(raised.Stdout, "0\n") {
					t.Fatalf("%s: a setuid-root binary did not raise the user to root: %+v", rt, raised)
				}
				if got := strings.TrimPrefix(raised.Stdout, "0\n"); got != asRoot.Stdout {
					t.Errorf("%s: the raised user's status\n%s\ndiffers from root's\n%s", rt, got, asRoot.Stdout)
				}
			}
		})
	}
}

// createBB creates a sandbox of the busybox template on runtime rt,
// deleted when the test ends.
func createBB(t *testing.T, ctx context.Context, c *client.Client, rt string) string {
	t.Helper()
	sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", Runtime: rt})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Sandboxes.Delete(context.Background(), sb.SandboxID) })
	return sb.SandboxID
}

func bootID(t *testing.T, ctx context.Context, c *client.Client, id string) string {
	t.Helper()
	return strings.TrimSpace(execAs(t, ctx, c, id, "user", "cat /proc/sys/kernel/random/boot_id").Stdout)
}

func execAs(t *testing.T, ctx context.Context, c *client.Client, id, user, cmd string) client.ExecResult {
	t.Helper()
	res, err := c.Commands.ExecWait(ctx, id, client.ExecRequest{Command: cmd, User: user, TimeoutMs: 20000})
	if err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	return res
}

// installSetids puts the setids helper (runtimetest) into sandbox id as
// /usr/local/bin/setids, setuid root: what sudo is, minus its policy.
func installSetids(t *testing.T, ctx context.Context, c *client.Client, id string) {
	t.Helper()
	f, err := os.Open(runtimetest.SetidsBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := c.Files.Write(ctx, id, "/usr/local/bin/setids", f, 0o755, "root"); err != nil {
		t.Fatal(err)
	}
	if res := execAs(t, ctx, c, id, "root", "chown 0:0 /usr/local/bin/setids && chmod 4755 /usr/local/bin/setids"); res.ExitCode != 0 {
		t.Fatalf("install setids: %+v", res)
	}
}
