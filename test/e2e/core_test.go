package e2e

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/warrenhq/warren/client"
)

// TestCore drives the real daemon through the CLI and the HTTP API: a
// template, a sandbox, commands, files, output caps, a SIGKILL of the daemon
// mid-command, recovery, and a delete that leaves nothing behind.
func TestCore(t *testing.T) {
	t.Parallel()
	d := busyboxDaemon(t, "--output-limit", "2097152")

	id := strings.TrimSpace(d.mustCLI("sandbox", "create", "--template", "bb", "--env", "GREETING=from-create", "--env", "OTHER=kept"))
	if id == "" {
		t.Fatal("sandbox create printed no id")
	}
	// envVars given at create reach every command; a command's own env wins.
	if out := d.mustCLI("exec", id, "--", "sh", "-c", "echo $GREETING $OTHER $HOME"); out != "from-create kept /home/user\n" {
		t.Fatalf("sandbox env: %q", out)
	}
	if out := d.mustCLI("exec", "--env", "GREETING=from-exec", id, "--", "sh", "-c", "echo $GREETING $OTHER"); out != "from-exec kept\n" {
		t.Fatalf("exec env over sandbox env: %q", out)
	}

	if out := d.mustCLI("exec", id, "--", "echo", "hello"); out != "hello\n" {
		t.Fatalf("echo: got %q", out)
	}
	if _, _, code := d.cli("", "exec", id, "--", "sh", "-c", "exit 3"); code != 3 {
		t.Fatalf("failing command: exit code %d, want 3", code)
	}

	// A file written through the API is what `cat` sees inside.
	d.mustCLI("files", "put", id, "-", "/workspace/note.txt")
	out, _, code := d.cli("written through the files API\n", "files", "put", id, "-", "/workspace/note.txt")
	if code != 0 {
		t.Fatalf("files put: exit %d", code)
	}
	_ = out
	if got := d.mustCLI("exec", id, "--", "cat", "/workspace/note.txt"); got != "written through the files API\n" {
		t.Fatalf("cat of a written file: %q", got)
	}
	if got := d.mustCLI("files", "get", id, "/workspace/note.txt", "-"); got != "written through the files API\n" {
		t.Fatalf("files get: %q", got)
	}

	c := d.client()
	ctx := ctxT(t, 5*time.Minute)

	// 10 MB of output against a 2 MiB server cap (and a 1 MiB request cap).
	res, err := c.Commands.ExecWait(ctx, id, client.ExecRequest{Command: "head -c 10000000 /dev/zero"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.OutputTruncated || len(res.Stdout) > 2<<20 || res.ExitCode != 0 {
		t.Fatalf("10 MB output, server cap 2 MiB: truncated=%v len=%d exit=%d", res.OutputTruncated, len(res.Stdout), res.ExitCode)
	}
	res, err = c.Commands.ExecWait(ctx, id, client.ExecRequest{Cmd: []string{"head", "-c", "10000000", "/dev/zero"}, OutputLimit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if !res.OutputTruncated || len(res.Stdout) > 1<<20 {
		t.Fatalf("10 MB output, request cap 1 MiB: truncated=%v len=%d", res.OutputTruncated, len(res.Stdout))
	}

	// Kill the daemon with SIGKILL while a command runs.
	d.mustCLI("exec", id, "--", "sh", "-c", "echo started > /workspace/bg.log")
	running := make(chan error, 1)
	go func() {
		var stdout bytes.Buffer
		_, err := c.Commands.Exec(ctx, id, client.ExecRequest{Command: "echo begin; sleep 30; echo never"}, &stdout, io.Discard)
		running <- err
	}()
	time.Sleep(500 * time.Millisecond)
	d.stop(syscall.SIGKILL)
	select {
	case <-running:
	case <-time.After(10 * time.Second):
		t.Fatal("the exec stream did not end when the daemon died")
	}
	d.start()
	det, err := d.client().Sandboxes.Get(ctx, id)
	if err != nil {
		t.Fatalf("sandbox after daemon restart: %v", err)
	}
	if det.State != "running" {
		t.Fatalf("sandbox after daemon restart: state %s (%s)", det.State, det.Reason)
	}
	if got := d.mustCLI("exec", id, "--", "cat", "/workspace/bg.log"); got != "started\n" {
		t.Fatalf("after restart: %q", got)
	}
	if got := d.mustCLI("exec", id, "--", "sh", "-c", "ps -o args 2>/dev/null | grep -c '[s]leep 30' || true"); strings.TrimSpace(got) == "0" {
		t.Logf("note: the command running at the kill did not survive (ps: %q)", got)
	}

	// Delete, and nothing of the sandbox is left on the host.
	d.mustCLI("sandbox", "rm", id)
	if left := leftovers(t, d.dataDir, id); len(left) > 0 {
		t.Fatalf("left behind after delete:\n%s", strings.Join(left, "\n"))
	}
	_, errOut, code := d.cli("", "sandbox", "get", id)
	if code == 0 || !strings.Contains(errOut, "not found") {
		t.Fatalf("get after delete: exit %d, %q", code, errOut)
	}
}

// TestBadInput checks that bad requests get a 4xx with a useful message and
// leave nothing behind.
func TestBadInput(t *testing.T) {
	t.Parallel()
	d := busyboxDaemon(t, "--max-sandboxes", "2")
	c := d.client()
	ctx := ctxT(t, 2*time.Minute)

	status := func(err error) int {
		var ae *client.Error
		if errors.As(err, &ae) {
			return ae.Code
		}
		t.Fatalf("want an API error, got %v", err)
		return 0
	}
	_, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "nope"})
	if status(err) != 404 || !strings.Contains(err.Error(), "template") {
		t.Fatalf("unknown template: %v", err)
	}
	_, err = c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "../etc"})
	if status(err) != 400 {
		t.Fatalf("bad template name: %v", err)
	}
	_, err = c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", Limits: &client.Limits{MemoryMB: -5}})
	if status(err) != 400 {
		t.Fatalf("negative memory: %v", err)
	}
	_, err = c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", Limits: &client.Limits{Pids: 1 << 40}})
	if status(err) != 400 {
		t.Fatalf("huge pids: %v", err)
	}
	if _, err = c.Sandboxes.Get(ctx, "BAD/../id"); status(err) != 400 && status(err) != 404 {
		t.Fatalf("bad id: %v", err)
	}
	if _, err = c.Sandboxes.Get(ctx, "doesnotexist"); status(err) != 404 {
		t.Fatalf("unknown sandbox: %v", err)
	}
	// An oversize body.
	big := bytes.Repeat([]byte("a"), 2<<20)
	req, _ := http.NewRequest("POST", "http://"+d.addr+"/sandboxes", bytes.NewReader(append(append([]byte(`{"metadata":{"k":"`), big...), []byte(`"}}`)...)))
	req.Header.Set("X-API-Key", d.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 413 {
		t.Fatalf("oversize body: status %d", resp.StatusCode)
	}
	// No key, a wrong key.
	resp, err = http.Get("http://" + d.addr + "/sandboxes")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("no key: status %d", resp.StatusCode)
	}
	if _, err := client.New("http://"+d.addr, "e2b_00000000000000000000000000000000").Templates.List(ctx); status(err) != 401 {
		t.Fatalf("wrong key: %v", err)
	}

	// Nothing of the rejected creates is left.
	if list, _, err := c.Sandboxes.List(ctx, client.ListOptions{}); err != nil || len(list) != 0 {
		t.Fatalf("after rejected creates: %v %v", list, err)
	}
	if vols, _ := os.ReadDir(d.dataDir + "/pool/volumes/sandboxes"); len(vols) != 0 {
		t.Fatalf("volumes left by rejected creates: %v", vols)
	}

	// The sandbox limit.
	a, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb"}); status(err) != 429 {
		t.Fatalf("third sandbox past --max-sandboxes 2: %v", err)
	}

	// Teams: another team's key sees none of admin's sandboxes.
	k, err := c.APIKeys.Create(ctx, client.NewAPIKey{Team: "other"})
	if err != nil {
		t.Fatal(err)
	}
	other := client.New("http://"+d.addr, k.Key)
	if _, err := other.Sandboxes.Get(ctx, a.SandboxID); status(err) != 404 {
		t.Fatalf("another team's sandbox: %v", err)
	}
	if err := other.Sandboxes.Delete(ctx, a.SandboxID); status(err) != 404 {
		t.Fatalf("delete another team's sandbox: %v", err)
	}
	if list, _, err := other.Sandboxes.List(ctx, client.ListOptions{}); err != nil || len(list) != 0 {
		t.Fatalf("another team's list: %v %v", list, err)
	}
	if _, err := other.APIKeys.Create(ctx, client.NewAPIKey{Team: "x"}); status(err) != 403 {
		t.Fatalf("non-admin creating keys: %v", err)
	}
	// A revoked key stops working at once, through the CLI too.
	if out := d.mustCLI("key", "ls"); !strings.Contains(out, "other") {
		t.Fatalf("key ls: %q", out)
	}
	d.mustCLI("key", "revoke", k.ID)
	if _, _, err := other.Sandboxes.List(ctx, client.ListOptions{}); status(err) != 401 {
		t.Fatalf("revoked key: %v", err)
	}

	// Files: a path that escapes is resolved inside the sandbox.
	rc, err := c.Files.Read(ctx, a.SandboxID, "../../../../etc/hostname")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	hostFile, _ := os.ReadFile("/etc/hostname")
	if len(hostFile) > 0 && bytes.Equal(got, hostFile) {
		t.Fatalf("../ in the files API read the host's /etc/hostname (%q)", got)
	}
	if _, err := c.Files.Read(ctx, a.SandboxID, "/no/such/file"); status(err) != 404 {
		t.Fatalf("missing file: %v", err)
	}

	for _, id := range []string{a.SandboxID, b.SandboxID} {
		if err := c.Sandboxes.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
		if left := leftovers(t, d.dataDir, id); len(left) > 0 {
			t.Fatalf("left behind:\n%s", strings.Join(left, "\n"))
		}
	}
	if err := c.Sandboxes.Delete(ctx, a.SandboxID); status(err) != 404 {
		t.Fatalf("delete twice: %v", err)
	}
}
