package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/client"
)

// TestHostileSandbox: a sandbox's root tries to make the daemon, which
// reads sandbox trees from the host side for diffs, read a host file:
// symlinks to it, a symlinked directory, and a file swapped with a symlink
// in a loop while diffs with content are asked for. Hostile paths in the
// file API get 4xx, never 5xx or host content. Killing its own agent (PID
// 1) gets the sandbox marked failed with the reason, and nothing leaks.
// Both privilege modes: with --no-new-privileges the attacker is root
// through the API; with setuid allowed (the default) it is the sandbox's
// user raised to root through a setuid-root helper. Both run in user
// namespaces (the default); a third runs the default without them
// (--userns=false).
func TestHostileSandbox(t *testing.T) {
	t.Parallel()
	for _, nnp := range []bool{false, true} {
		t.Run(privilegeMode(nnp), func(t *testing.T) {
			t.Parallel()
			hostileSandbox(t, nnp)
		})
	}
	t.Run("no-userns", func(t *testing.T) {
		t.Parallel()
		hostileSandbox(t, false, "--userns=false")
	})
	t.Run("device", func(t *testing.T) {
		t.Parallel()
		hostileSandbox(t, false, "--cdi-spec-dirs", testCDI(t))
	})
}

func hostileSandbox(t *testing.T, nnp bool, args ...string) {
	d := busyboxDaemon(t, append(privilegeArgs(nnp), args...)...)
	c := d.client()
	ctx := ctxT(t, 3*time.Minute)
	sb, err := c.Sandboxes.Create(ctx, withTestDevice(client.NewSandbox{TemplateID: "bb"}, args))
	if err != nil {
		t.Fatal(err)
	}
	id := sb.SandboxID
	// A secret on the host, at a path the sandbox knows.
	const secret = "HOST-SECRET-b9f1"
	secretDir, secretFile := hostSecret(t, secret)
	// attacker is how the hostile commands run: as root through the API,
	// or as the user raised through setuid.
	attacker := client.ExecRequest{User: "root"}
	if !nnp {
		installSetids(t, ctx, c, id)
		attacker.User = "user"
	}
	as := func(script string) client.ExecRequest {
		req := attacker
		req.Command, req.TimeoutMs = script, 20000
		if !nnp {
			req.Command = asRaisedUser(script)
		}
		return req
	}
	root := func(script string) client.ExecResult {
		t.Helper()
		res, err := c.Commands.ExecWait(ctx, id, as(script))
		if err != nil {
			t.Fatalf("%s: %v", script, err)
		}
		return res
	}
	if got := strings.TrimSpace(root("id -u").Stdout); got != "0" {
		t.Fatalf("the attacker is uid %q, want root", got)
	}
	root("mkdir -p /workspace/d && echo one > /workspace/plain.txt && echo x > /workspace/d/f.txt")
	base, err := c.Snapshots.Create(ctx, id, client.NewSnapshot{})
	if err != nil {
		t.Fatal(err)
	}
	root("ln -s " + secretFile + " /workspace/link.txt; ln -s " + secretDir + " /workspace/dirlink; " +
		"rm -rf /workspace/d && ln -s " + secretDir + " /workspace/d; " +
		"echo two > /workspace/plain.txt; ln -s /proc/1/root" + secretFile + " /workspace/magic.txt")
	noSecret := func(what string, v any) {
		t.Helper()
		b, _ := json.Marshal(v)
		if strings.Contains(string(b), secret) {
			t.Fatalf("%s leaked the host's secret: %s", what, b)
		}
	}
	diff, err := c.Snapshots.Diff(ctx, base.SnapshotID, "live", true)
	if err != nil {
		t.Fatal(err)
	}
	noSecret("diff to live", diff)
	if diff.Modified == 0 {
		t.Errorf("the diff missed the modified file: %+v", diff)
	}
	after, err := c.Snapshots.Create(ctx, id, client.NewSnapshot{})
	if err != nil {
		t.Fatal(err)
	}
	if diff, err = c.Snapshots.Diff(ctx, base.SnapshotID, after.SnapshotID, true); err != nil {
		t.Fatal(err)
	}
	noSecret("diff between snapshots", diff)

	// TOCTOU: a file flips between a regular file and a symlink to the
	// secret as fast as the sandbox can, while diffs read it.
	if _, err := c.Processes.Start(ctx, id, client.StartProcessRequest{Tag: "flip", ExecRequest: as("while :; do echo small > /workspace/flip.tmp; mv -f /workspace/flip.tmp /workspace/plain.txt; ln -sf " + secretFile + " /workspace/flip.lnk; mv -f /workspace/flip.lnk /workspace/plain.txt; done")}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 150; i++ {
		d, err := c.Snapshots.Diff(ctx, base.SnapshotID, "live", true)
		if err != nil {
			t.Fatal(err)
		}
		noSecret("a diff racing a symlink swap", d)
	}
	if err := c.Processes.Signal(ctx, id, "flip", "SIGKILL"); err != nil {
		t.Fatal(err)
	}

	// Hostile paths in the file API: refused or resolved inside, never a
	// server error, never the host's file.
	for _, p := range []string{
		secretFile, "/../../.." + secretFile, "../../../../" + secretFile, "/workspace/../../..", "/workspace/link.txt",
		"/workspace/dirlink/secret.txt", "/proc/1/root" + secretFile, "/a\x00b", strings.Repeat("n", 300), "/" + strings.Repeat("deep/", 900) + "x",
	} {
		q := url.Values{"path": {p}}
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+d.addr+"/sandboxes/"+id+"/files?"+q.Encode(), nil)
		req.Header.Set("X-API-Key", d.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body [4096]byte
		n, _ := resp.Body.Read(body[:])
		resp.Body.Close()
		if resp.StatusCode >= 500 {
			t.Errorf("GET file %.60q: %d %s", p, resp.StatusCode, body[:n])
		}
		if strings.Contains(string(body[:n]), secret) {
			t.Errorf("GET file %.60q returned the host's secret", p)
		}
	}
	// A giant file name is refused cleanly on write, too.
	if _, err := c.Files.Write(ctx, id, "/workspace/"+strings.Repeat("x", 5000), strings.NewReader("x"), 0o644, ""); err == nil || client.StatusCode(err) >= 500 {
		t.Errorf("write of a 5000-byte file name: %v", err)
	}

	// The sandbox's root ends its own agent (PID 1): the sandbox is failed
	// with the reason and its processes, cgroups and mounts are freed.
	root("kill -TERM 1 &")
	deadline := time.Now().Add(30 * time.Second)
	for {
		det, err := c.Sandboxes.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if det.State == "failed" {
			if !strings.Contains(det.Reason, "init process") {
				t.Errorf("failed with reason %q", det.Reason)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after its agent was killed the sandbox is %s", det.State)
		}
		time.Sleep(200 * time.Millisecond)
	}
	waitNoLeftovers(t, ctx, d, id)
}

// hostSecret writes secret (and a newline) into secret.txt of a new host
// directory, removed when the test ends: what a hostile sandbox must never
// read, change or write beside.
func hostSecret(t *testing.T, secret string) (dir, file string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "warren-host-secret-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	file = filepath.Join(dir, "secret.txt")
	if err := os.WriteFile(file, []byte(secret+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, file
}

// waitNoLeftovers waits until nothing of a failed sandbox's processes,
// cgroups, mounts and runtime state is left (its record and files stay).
func waitNoLeftovers(t *testing.T, ctx context.Context, d *daemon, id string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var left []string
		for _, l := range leftovers(t, d.dataDir, id) {
			if !strings.HasPrefix(l, "file: "+filepath.Join(d.dataDir, "pool/volumes/sandboxes")) &&
				!strings.HasPrefix(l, "file: "+filepath.Join(d.dataDir, "sandbox-logs")) {
				left = append(left, l)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("a failed sandbox left:\n%s", strings.Join(left, "\n"))
		}
		time.Sleep(200 * time.Millisecond)
	}
}
