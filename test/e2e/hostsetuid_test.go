package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/client"
)

// TestHostUserCannotRunSandboxSetuid: a sandbox's root can leave a
// setuid-root binary in its tree (here the setids helper), and the pool
// that holds the tree is mounted without nosuid, since the sandboxes' roots
// are bind mounts of it. A host user other than root must not be able to
// run such a file by path, from the sandbox's volume or a snapshot of it,
// even when the operator made the data directory world-readable.
func TestHostUserCannotRunSandboxSetuid(t *testing.T) {
	t.Parallel()
	d := busyboxDaemon(t)
	c := d.client()
	ctx := ctxT(t, time.Minute)
	id := createBB(t, ctx, c, "native")
	installSetids(t, ctx, c, id)
	snap, err := c.Snapshots.Create(ctx, id, client.NewSnapshot{})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d.dataDir, 0o755); err != nil {
		t.Fatal(err)
	}
	volumes := filepath.Join(d.dataDir, "pool", "volumes")
	for _, p := range []string{
		filepath.Join(volumes, "sandboxes", id, "usr/local/bin/setids"),
		filepath.Join(volumes, "snapshots", snap.SnapshotID, "usr/local/bin/setids"),
	} {
		if fi, err := os.Stat(p); err != nil || fi.Mode()&os.ModeSetuid == 0 {
			t.Fatalf("%s: %v %v; want the sandbox's setuid file there", p, fi, err)
		}
		// The shell resolves the path as nobody (setpriv itself would
		// resolve it as root).
		out, err := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c", "exec "+p+" 0 id -u").CombinedOutput()
		if err == nil || strings.TrimSpace(string(out)) == "0" || !strings.Contains(string(out), "ermission denied") {
			t.Errorf("a host user ran the sandbox's setuid file %s: %q %v", p, out, err)
		}
	}
}
