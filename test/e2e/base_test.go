package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/client"
)

// TestBaseTemplate builds the real `base` template (debootstrap; cached in
// WARREN_CACHE_DIR after the first run) and uses it the way an agent would.
func TestBaseTemplate(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the base template by debootstrap (minutes): not in -short mode")
	}
	d := newDaemon(t)
	d.start()
	start := time.Now()
	d.mustCLI("template", "build", "base", "--debootstrap", "bookworm", "--data-dir", d.dataDir)
	t.Logf("base template built in %s", time.Since(start).Round(time.Millisecond))

	c := d.client()
	ctx := ctxT(t, 5*time.Minute)
	sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{}) // the SDK's default template: base
	if err != nil {
		t.Fatal(err)
	}
	if sb.TemplateID != "base" {
		t.Fatalf("default template: %q", sb.TemplateID)
	}
	run := func(req client.ExecRequest) client.ExecResult {
		t.Helper()
		res, err := c.Commands.ExecWait(ctx, sb.SandboxID, req)
		if err != nil {
			t.Fatalf("%v: %v", req, err)
		}
		return res
	}
	checks := []struct {
		cmd, want string
	}{
		{"whoami", "user"},
		{"pwd", "/workspace"},
		{"echo $HOME", "/home/user"},
		{"python3 -c 'print(6*7)'", "42"},
		{"python -c 'import sys; print(sys.version_info[0])'", "3"},
		{"git --version | cut -d' ' -f1-2", "git version"},
		{"curl --version | head -1 | cut -d' ' -f1", "curl"},
		{"test -f /etc/ssl/certs/ca-certificates.crt && echo certs", "certs"},
		{"bash -c 'echo $BASH_VERSION' | cut -c1", "5"},
		{"test -f /etc/sudoers.d/warren-user && sudo -n whoami", "root"},
		{"ss -V | cut -d' ' -f1", "ss"},                                                // the SDK's waitForPort
		{"pip config list | grep break-system", "global.break-system-packages='true'"}, // pipInstall as root (PEP 668)
	}
	for _, ch := range checks {
		res := run(client.ExecRequest{Command: ch.cmd})
		if got := strings.TrimSpace(res.Stdout); got != ch.want || res.ExitCode != 0 {
			t.Errorf("%s: got %q (exit %d, stderr %q), want %q", ch.cmd, got, res.ExitCode, res.Stderr, ch.want)
		}
	}
	if got := strings.TrimSpace(run(client.ExecRequest{Command: "whoami", User: "root"}).Stdout); got != "root" {
		t.Errorf("as root: %q", got)
	}
	// A file written through the API belongs to user.
	if _, err := c.Files.Write(ctx, sb.SandboxID, "/workspace/main.py", strings.NewReader("print('hi from a file')\n"), 0o644, ""); err != nil {
		t.Fatal(err)
	}
	if got := run(client.ExecRequest{Command: "python3 main.py && stat -c %U main.py"}).Stdout; got != "hi from a file\nuser\n" {
		t.Errorf("python of a written file: %q", got)
	}
	if err := c.Sandboxes.Delete(ctx, sb.SandboxID); err != nil {
		t.Fatal(err)
	}
	if left := leftovers(t, d.dataDir, sb.SandboxID); len(left) > 0 {
		t.Fatalf("left behind:\n%s", strings.Join(left, "\n"))
	}
}
