package e2e

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/warrenhq/warren/client"
)

// sudoRefused is what sudo says where no_new_privs is set: the message a
// user of a --no-new-privileges server or template sees (docs/security.md).
const sudoRefused = `The "no new privileges" flag is set`

// TestSudo: in the real base template (debootstrap, cached), `user` has
// passwordless sudo on both runtimes; a template built with
// --no-new-privileges refuses it with sudo's own message, and so does every
// template of a server started with --no-new-privileges.
func TestSudo(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the base template by debootstrap (minutes when not cached): not in -short mode")
	}
	d := gvisorDaemon(t)
	start := time.Now()
	d.mustCLI("template", "build", "base", "--debootstrap", "bookworm", "--data-dir", d.dataDir)
	d.mustCLI("template", "build", "locked", "--debootstrap", "bookworm", "--no-new-privileges", "--data-dir", d.dataDir)
	t.Logf("two base templates built in %s", time.Since(start).Round(time.Millisecond))
	c := d.client()
	ctx := ctxT(t, 5*time.Minute)
	if out := d.mustCLI("template", "ls"); !strings.Contains(out, "SUDO") {
		t.Errorf("template ls shows no SUDO column:\n%s", out)
	}
	for _, rt := range []string{"native", "gvisor"} {
		if res := sudoIn(t, ctx, c, "base", rt); res.ExitCode != 0 || res.Stdout != "root\n" {
			t.Errorf("%s: sudo whoami as user in base: %+v", rt, res)
		}
		if res := sudoIn(t, ctx, c, "locked", rt); res.ExitCode == 0 || !strings.Contains(res.Stderr, sudoRefused) {
			t.Errorf("%s: sudo whoami in a --no-new-privileges template: %+v", rt, res)
		}
	}

	// The server's flag covers every template.
	d.stop(syscall.SIGTERM)
	d.args = append(d.args, "--no-new-privileges")
	d.start()
	c = d.client()
	if res := sudoIn(t, ctx, c, "base", "native"); res.ExitCode == 0 || !strings.Contains(res.Stderr, sudoRefused) {
		t.Errorf("sudo whoami under a --no-new-privileges server: %+v", res)
	}
}

// sudoIn runs `sudo whoami` as user in a new sandbox of template on runtime
// rt (deleted when the test ends).
func sudoIn(t *testing.T, ctx context.Context, c *client.Client, template, rt string) client.ExecResult {
	t.Helper()
	sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: template, Runtime: rt})
	if err != nil {
		t.Fatalf("create %s on %s: %v", template, rt, err)
	}
	t.Cleanup(func() { c.Sandboxes.Delete(context.Background(), sb.SandboxID) })
	return execAs(t, ctx, c, sb.SandboxID, "user", "sudo whoami")
}
