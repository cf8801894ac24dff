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

// TestTemplateCLI builds a template from a rootfs tarball with the CLI,
// lists it, runs a sandbox from it and removes it.
func TestTemplateCLI(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.start()
	// A rootfs directory: busybox plus a marker file, tarred up.
	root := t.TempDir()
	for _, dir := range []string{"bin", "etc", "tmp"} {
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "bin", "busybox"), bb, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, applet := range []string{"sh", "cat", "echo", "true"} {
		if err := os.Symlink("busybox", filepath.Join(root, "bin", applet)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "etc", "marker"), []byte("from a tarball\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tarball := filepath.Join(t.TempDir(), "rootfs.tar.gz")
	if out, err := exec.Command("tar", "-czf", tarball, "-C", root, ".").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v %s", err, out)
	}

	d.mustCLI("template", "build", "tarred", "--from-rootfs", tarball, "--data-dir", d.dataDir)
	if _, errOut, code := d.cli("", "template", "build", "tarred", "--from-rootfs", tarball, "--data-dir", d.dataDir); code == 0 || !strings.Contains(errOut, "exists") {
		t.Fatalf("building over an existing template: exit %d %q", code, errOut)
	}
	if _, errOut, code := d.cli("", "template", "build", "nosource", "--data-dir", d.dataDir); code == 0 || errOut == "" {
		t.Fatalf("build with no source: exit %d %q", code, errOut)
	}
	if out := d.mustCLI("template", "ls"); !strings.Contains(out, "tarred") {
		t.Fatalf("template ls: %q", out)
	}
	id := strings.TrimSpace(d.mustCLI("sandbox", "create", "--template", "tarred"))
	if got := d.mustCLI("exec", id, "--", "cat", "/etc/marker"); got != "from a tarball\n" {
		t.Fatalf("marker: %q", got)
	}
	// Only the admin team may remove templates.
	ctx := ctxT(t, time.Minute)
	k, err := d.client().APIKeys.Create(ctx, client.NewAPIKey{Team: "dev"})
	if err != nil {
		t.Fatal(err)
	}
	if err := client.New("http://"+d.addr, k.Key).Templates.Delete(ctx, "tarred"); client.StatusCode(err) != 403 {
		t.Fatalf("non-admin template rm: %v", err)
	}
	d.mustCLI("template", "rm", "tarred")
	if out := d.mustCLI("template", "ls"); strings.Contains(out, "tarred") {
		t.Fatalf("template ls after rm: %q", out)
	}
	// The sandbox made from it keeps running on its own copy.
	if got := d.mustCLI("exec", id, "--", "cat", "/etc/marker"); got != "from a tarball\n" {
		t.Fatalf("marker after template rm: %q", got)
	}
	if _, errOut, code := d.cli("", "sandbox", "create", "--template", "tarred"); code == 0 || !strings.Contains(errOut, "does not exist") {
		t.Fatalf("create from a removed template: exit %d %q", code, errOut)
	}
	if _, errOut, code := d.cli("", "template", "rm", "tarred"); code == 0 || !strings.Contains(errOut, "not found") {
		t.Fatalf("rm twice: exit %d %q", code, errOut)
	}
	d.mustCLI("sandbox", "rm", id)
}
