package e2e

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/client"
)

// TestVolumesShared (native): a shared volume made with the CLI is mounted
// read-write into two running sandboxes at once, owned by `user`; what one
// writes the other reads; a rollback leaves the volume alone and a fork
// mounts it too; its cap turns a large write into EDQUOT; deleting it while
// sandboxes mount it is a 409; its data outlives both sandboxes; the CLI
// reaches its files (vol:NAME); deleting it at last removes its tree.
func TestVolumesShared(t *testing.T) {
	t.Parallel()
	d := busyboxDaemon(t)
	c := d.client()
	ctx := ctxT(t, 4*time.Minute)

	volID := strings.TrimSpace(d.mustCLI("volume", "create", "data", "--size-mb", "32"))
	if out := d.mustCLI("volume", "ls"); !strings.Contains(out, volID) || !strings.Contains(out, "data") {
		t.Fatalf("volume ls does not list data (%s):\n%s", volID, out)
	}
	idA := strings.TrimSpace(d.mustCLI("sandbox", "create", "--template", "bb", "--volume", "data:/data"))
	t.Cleanup(func() { _ = c.Sandboxes.Delete(context.Background(), idA) })
	sbB, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", VolumeMounts: []client.VolumeMount{{Name: "data", Path: "/mnt/shared"}}})
	if err != nil {
		t.Fatal(err)
	}
	idB := sbB.SandboxID
	t.Cleanup(func() { _ = c.Sandboxes.Delete(context.Background(), idB) })

	if det, err := c.Sandboxes.Get(ctx, idA); err != nil || len(det.VolumeMounts) != 1 || det.VolumeMounts[0] != (client.VolumeMount{Name: "data", Path: "/data"}) {
		t.Errorf("GET sandbox A: volumeMounts %+v, %v", det.VolumeMounts, err)
	}
	if res := execAs(t, ctx, c, idA, "root", "stat -c %u:%g /data"); strings.TrimSpace(res.Stdout) != "1000:1000" {
		t.Errorf("the volume's root is owned by %q, want user's 1000:1000 (%+v)", res.Stdout, res)
	}
	if res := execAs(t, ctx, c, idA, "user", "echo hello > /data/a.txt && stat -c %u /data/a.txt"); res.ExitCode != 0 || strings.TrimSpace(res.Stdout) != "1000" {
		t.Fatalf("user writes to the volume in A: %+v", res)
	}
	if res := execAs(t, ctx, c, idB, "user", "cat /mnt/shared/a.txt && echo from-b > /mnt/shared/b.txt"); res.ExitCode != 0 || res.Stdout != "hello\n" {
		t.Fatalf("B reads what A wrote: %+v", res)
	}

	// A rollback restores the sandbox's own tree and leaves the volume
	// as it is.
	snap, err := c.Snapshots.Turn(ctx, idA)
	if err != nil {
		t.Fatal(err)
	}
	execAs(t, ctx, c, idA, "root", "echo later > /data/after.txt && echo mine > /root/own.txt")
	if _, err := c.Snapshots.Rollback(ctx, idA, client.RollbackRequest{SnapshotID: snap.SnapshotID}); err != nil {
		t.Fatal(err)
	}
	if res := execAs(t, ctx, c, idA, "root", "cat /data/after.txt /data/b.txt; test -e /root/own.txt && echo own-kept"); res.Stdout != "later\nfrom-b\n" {
		t.Errorf("after a rollback: %q (stderr %q), want the volume's files kept and the root's own file gone", res.Stdout, res.Stderr)
	}
	// A fork mounts its parent's volumes: shared, not copied.
	forks, err := c.Snapshots.Fork(ctx, idA, client.ForkRequest{Count: 1})
	if err != nil || len(forks) != 1 || forks[0].Sandbox == nil {
		t.Fatalf("fork: %+v, %v", forks, err)
	}
	idF := forks[0].Sandbox.SandboxID
	t.Cleanup(func() { _ = c.Sandboxes.Delete(context.Background(), idF) })
	if res := execAs(t, ctx, c, idF, "user", "echo from-fork > /data/fork.txt && cat /data/a.txt"); res.Stdout != "hello\n" {
		t.Errorf("the fork reads the volume: %+v", res)
	}
	if res := execAs(t, ctx, c, idB, "user", "cat /mnt/shared/fork.txt"); res.Stdout != "from-fork\n" {
		t.Errorf("B reads what the fork wrote: %+v", res)
	}

	// The cap (32 MiB) stops a 64 MiB write inside the sandbox.
	if res := execAs(t, ctx, c, idA, "user", "dd if=/dev/zero of=/data/big bs=1M count=64 2>&1; sync; rm -f /data/big"); !strings.Contains(strings.ToLower(res.Stdout), "quota") {
		t.Errorf("a 64 MiB write into a 32 MiB volume: %+v, want a disk quota error", res)
	}

	if err := c.Volumes.Delete(ctx, "data"); client.StatusCode(err) != http.StatusConflict || !strings.Contains(err.Error(), idA) {
		t.Errorf("delete a mounted volume: %v, want 409 naming the sandboxes", err)
	}

	// The CLI reaches the volume's files.
	if out := d.mustCLI("files", "get", "vol:data", "/a.txt"); out != "hello\n" {
		t.Errorf("files get vol:data /a.txt: %q", out)
	}
	if out, errOut, code := d.cli("put-by-cli\n", "files", "put", "vol:data", "-", "/dir/c.txt"); code != 0 {
		t.Fatalf("files put vol:data: %d %s %s", code, out, errOut)
	}
	if res := execAs(t, ctx, c, idB, "user", "cat /mnt/shared/dir/c.txt && stat -c %u /mnt/shared/dir/c.txt"); res.Stdout != "put-by-cli\n1000\n" {
		t.Errorf("B reads the file the CLI put: %+v", res)
	}
	if out := d.mustCLI("files", "ls", "vol:data", "/"); !strings.Contains(out, "a.txt") || !strings.Contains(out, "dir") {
		t.Errorf("files ls vol:data /:\n%s", out)
	}

	// Its data outlives every sandbox that mounted it.
	for _, id := range []string{idA, idB, idF} {
		if err := c.Sandboxes.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	sbC, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", VolumeMounts: []client.VolumeMount{{Name: "data", Path: "/data"}}})
	if err != nil {
		t.Fatal(err)
	}
	if res := execAs(t, ctx, c, sbC.SandboxID, "user", "cat /data/a.txt /data/dir/c.txt"); res.Stdout != "hello\nput-by-cli\n" {
		t.Errorf("a new sandbox reads the volume after the others went: %+v", res)
	}
	if err := c.Sandboxes.Delete(ctx, sbC.SandboxID); err != nil {
		t.Fatal(err)
	}
	d.mustCLI("volume", "rm", "data")
	if _, err := os.Stat(filepath.Join(d.dataDir, "pool", "volumes", "shared", volID)); !os.IsNotExist(err) {
		t.Errorf("the deleted volume's tree is still there: %v", err)
	}
	if vs, err := c.Volumes.List(ctx); err != nil || len(vs) != 0 {
		t.Errorf("volumes after rm: %+v, %v", vs, err)
	}
}

// TestVolumesGVisor: one volume mounted into a gVisor sandbox and a native
// one at once; each reads what the other wrote, the gVisor sandbox's user
// owns what it writes, and the mount is there again after a pause and
// after a hibernation's wake.
func TestVolumesGVisor(t *testing.T) {
	t.Parallel()
	d := gvisorDaemon(t)
	c := d.client()
	ctx := ctxT(t, 4*time.Minute)
	if _, err := c.Volumes.Create(ctx, "both", 0); err != nil {
		t.Fatal(err)
	}
	mounts := []client.VolumeMount{{Name: "both", Path: "/work"}}
	g, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", Runtime: "gvisor", VolumeMounts: mounts})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Sandboxes.Delete(context.Background(), g.SandboxID) })
	n, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", Runtime: "native", VolumeMounts: mounts})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Sandboxes.Delete(context.Background(), n.SandboxID) })
	if res := execAs(t, ctx, c, g.SandboxID, "user", "echo from-gvisor > /work/g.txt && stat -c %u /work/g.txt"); res.ExitCode != 0 || res.Stdout != "1000\n" {
		t.Fatalf("gVisor writes to the volume: %+v", res)
	}
	if res := execAs(t, ctx, c, n.SandboxID, "user", "cat /work/g.txt && echo from-native > /work/n.txt"); res.Stdout != "from-gvisor\n" {
		t.Fatalf("native reads what gVisor wrote: %+v", res)
	}
	if res := execAs(t, ctx, c, g.SandboxID, "user", "cat /work/n.txt"); res.Stdout != "from-native\n" {
		t.Errorf("gVisor reads what native wrote: %+v", res)
	}
	// A memory-keeping pause and resume keeps the mount.
	if err := c.Lifecycle.Pause(ctx, g.SandboxID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Lifecycle.Resume(ctx, g.SandboxID); err != nil {
		t.Fatal(err)
	}
	if res := execAs(t, ctx, c, g.SandboxID, "user", "cat /work/n.txt /work/g.txt"); res.Stdout != "from-native\nfrom-gvisor\n" {
		t.Errorf("gVisor reads the volume after a pause and resume: %+v", res)
	}
	// Hibernation checkpoints its memory to disk and the wake restores it
	// with the volume mounted again; what was written meanwhile is there.
	if _, err := c.Lifecycle.Hibernate(ctx, g.SandboxID); err != nil {
		t.Fatal(err)
	}
	execAs(t, ctx, c, n.SandboxID, "user", "echo while-hibernated > /work/h.txt")
	if _, err := c.Lifecycle.Resume(ctx, g.SandboxID); err != nil {
		t.Fatal(err)
	}
	if res := execAs(t, ctx, c, g.SandboxID, "user", "cat /work/h.txt && echo after-wake > /work/w.txt"); res.Stdout != "while-hibernated\n" {
		t.Errorf("gVisor reads the volume after hibernation: %+v", res)
	}
	if res := execAs(t, ctx, c, n.SandboxID, "user", "cat /work/w.txt"); res.Stdout != "after-wake\n" {
		t.Errorf("native reads what the woken gVisor sandbox wrote: %+v", res)
	}
}

// TestVolumesBadInput: names that are not names, mount paths a sandbox may
// not mount over, an unknown volume, a volume or a path twice: each a clear
// 400 that leaves no sandbox and no volume behind. The content API wants
// the volume's token, refuses '..', never follows a symlink out of the
// volume, and answers 507 past the cap.
func TestVolumesBadInput(t *testing.T) {
	t.Parallel()
	d := busyboxDaemon(t)
	c := d.client()
	ctx := ctxT(t, 3*time.Minute)

	for _, name := range []string{"", "../x", "a/b", ".hidden", "-x", "a..b", "sp ace", strings.Repeat("n", 65)} {
		if code, msg := d.postAPI(ctx, "/volumes", `{"name": "`+name+`"}`); code != 400 || !strings.Contains(msg, "volume name") {
			t.Errorf("create volume %q: %d %s, want 400", name, code, msg)
		}
	}
	v, err := c.Volumes.Create(ctx, "good", 16)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Volumes.Create(ctx, "good", 0); client.StatusCode(err) != http.StatusConflict {
		t.Errorf("a second volume named good: %v, want 409", err)
	}
	if _, err := c.Volumes.Create(ctx, "other", 0); err != nil {
		t.Fatal(err)
	}
	bad := map[string][]client.VolumeMount{
		"root":         {{Name: "good", Path: "/"}},
		"proc":         {{Name: "good", Path: "/proc"}},
		"under proc":   {{Name: "good", Path: "/proc/sys"}},
		"sys":          {{Name: "good", Path: "/sys"}},
		"dev":          {{Name: "good", Path: "/dev/shm"}},
		"agent":        {{Name: "good", Path: "/.warren"}},
		"relative":     {{Name: "good", Path: "data"}},
		"dot-dot":      {{Name: "good", Path: "/data/../etc"}},
		"not clean":    {{Name: "good", Path: "/data/"}},
		"unknown":      {{Name: "nosuch", Path: "/data"}},
		"bad name":     {{Name: "../good", Path: "/data"}},
		"volume twice": {{Name: "good", Path: "/a"}, {Name: "good", Path: "/b"}},
		"path twice":   {{Name: "good", Path: "/a"}, {Name: "other", Path: "/a"}},
	}
	for what, ms := range bad {
		if _, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", VolumeMounts: ms}); client.StatusCode(err) != 400 || !strings.Contains(err.Error(), "volume") {
			t.Errorf("%s: %v, want 400 about the volume mounts", what, err)
		}
	}
	if list, _, err := c.Sandboxes.List(ctx, client.ListOptions{}); err != nil || len(list) != 0 {
		t.Errorf("sandboxes after refused creates: %d, %v; want none", len(list), err)
	}
	if vs, err := c.Volumes.List(ctx); err != nil || len(vs) != 2 {
		t.Errorf("volumes: %+v, %v; want good and other only", vs, err)
	}

	// The content API: the volume's token and nothing else.
	url := "http://" + d.addr + "/volumecontent/" + v.VolumeID + "/path?path=/"
	for what, auth := range map[string]string{"no token": "", "API key": "Bearer " + d.key, "wrong token": "Bearer vtk_00"} {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		if code, msg := do(t, req); code != 401 {
			t.Errorf("content API with %s: %d %s, want 401", what, code, msg)
		}
	}
	vc := c.Volumes.Content(v)
	if _, err := vc.Stat(ctx, "/../../etc/passwd"); client.StatusCode(err) != 400 {
		t.Errorf("stat /../../etc/passwd: %v, want 400", err)
	}
	// A symlink a sandbox plants cannot lead the host out of the volume.
	sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", VolumeMounts: []client.VolumeMount{{Name: "good", Path: "/data"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Sandboxes.Delete(context.Background(), sb.SandboxID) })
	execAs(t, ctx, c, sb.SandboxID, "root", "ln -s / /data/up && ln -s ../../../../../../etc/passwd /data/pw")
	for _, p := range []string{"/up/etc/passwd", "/pw"} {
		rc, err := vc.Read(ctx, p)
		if err == nil {
			rc.Close()
			t.Errorf("read %s through a symlink out of the volume: served, want refused", p)
		} else if code := client.StatusCode(err); code != 400 && code != 404 {
			t.Errorf("read %s: %v, want 400 or 404", p, err)
		}
	}
	if _, err := vc.Write(ctx, "/up/tmp/escaped", strings.NewReader("x")); err == nil {
		t.Errorf("write through a symlink out of the volume succeeded")
	}
	// Past the cap (16 MiB): 507, and no partial file.
	if _, err := vc.Write(ctx, "/big", &zeros{n: 32 << 20}); client.StatusCode(err) != http.StatusInsufficientStorage {
		t.Errorf("a 32 MiB write into a 16 MiB volume: %v, want 507", err)
	}
	if _, err := vc.Stat(ctx, "/big"); client.StatusCode(err) != 404 {
		t.Errorf("the refused write left /big: %v", err)
	}
}

// zeros reads n zero bytes.
type zeros struct{ n int }

func (z *zeros) Read(p []byte) (int, error) {
	if z.n == 0 {
		return 0, io.EOF
	}
	k := min(len(p), z.n)
	clear(p[:k])
	z.n -= k
	return k, nil
}
