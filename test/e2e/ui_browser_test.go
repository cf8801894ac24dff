package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/testutil"
)

// The XSS plants: each would set window.__xss if it were parsed as HTML.
const (
	xssMeta = `<img src=x onerror="window.__xss='meta'">`
	xssFile = `<img src=x onerror="window.__xss='file'">.txt`
)

// TestUIBrowser drives the dashboard in Debian's chromium (headless, by
// playwright-core from test/e2e/ui/browser.mjs): sign in, the sandbox made
// here appears, `echo hi` in the terminal, resize, Ctrl-C, a file edited and
// read back through the API, three turns and a fork in the timeline and the
// tree, a diff with the changed line, a rollback from the tree; refusals
// without a key and with another team's; axe-core on every page; XSS plants
// rendered as text; no request to another origin. Screenshots land in
// $WARREN_UI_ARTIFACTS (default: the test's temp dir).
func TestUIBrowser(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("real sandboxes and a browser: not in -short mode")
	}
	node := requireNode(t)
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		testutil.Missing(t, "chromium is not installed: make deps installs Debian's chromium for the dashboard's browser test")
	}
	dir, err := filepath.Abs("ui")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "playwright-core")); err != nil {
		testutil.Missing(t, "test/e2e/ui/node_modules is missing: make ui-deps installs playwright-core and axe-core with npm (%v)", err)
	}
	d, ctx, id := busyboxSandbox(t, 10*time.Minute)
	c := d.client()
	fork := uiHistory(ctx, t, c, id)
	// A process whose output the page follows live.
	if _, err := c.Processes.Start(ctx, id, client.StartProcessRequest{Tag: "ticker",
		ExecRequest: client.ExecRequest{Command: "i=0; while [ $i -lt 600 ]; do i=$((i+1)); echo tick-$i; sleep 1; done"}}); err != nil {
		t.Fatal(err)
	}
	other := strings.TrimSpace(lastLine(d.mustCLI("key", "create", "--team", "others")))
	uiTerminalRefusals(t, d, id, other)

	artifacts := os.Getenv("WARREN_UI_ARTIFACTS")
	if artifacts == "" {
		artifacts = t.TempDir()
	}
	if err := os.MkdirAll(artifacts, 0o755); err != nil {
		t.Fatal(err)
	}
	runNodeScript(ctx, t, node, dir, "browser.mjs",
		"WARREN_URL=http://"+d.addr, "WARREN_KEY="+d.key, "WARREN_OTHER_KEY="+other,
		"SANDBOX="+id, "FORK="+fork, "CHROMIUM="+chromium, "ARTIFACTS="+artifacts, "XSS_FILE="+xssFile)
	t.Logf("screenshots in %s", artifacts)
}

// uiHistory gives sandbox id a file, an XSS-planted file name, three turns
// that change the file (v1, v2, v3) and a fork of the second; it returns the
// fork's id.
func uiHistory(ctx context.Context, t *testing.T, c *client.Client, id string) string {
	t.Helper()
	write := func(path, content string) {
		if _, err := c.Files.Write(ctx, id, path, strings.NewReader(content), 0o644, ""); err != nil {
			t.Fatalf("write %s: %v", path, err)
		}
	}
	write("/home/user/"+xssFile, "planted\n")
	var turns []client.Snapshot
	for _, v := range []string{"v1", "v2", "v3"} {
		write("/home/user/notes.txt", "line one\nversion "+v+"\n")
		if v == "v2" { // a command the timeline shows in turn 2
			if res, err := c.Commands.ExecWait(ctx, id, client.ExecRequest{Command: "echo turn-two-command"}); err != nil || res.ExitCode != 0 {
				t.Fatalf("exec: %v %+v", err, res)
			}
		}
		if v == "v3" { // a tool call the timeline shows in turn 3
			if _, err := c.Tools.Call(ctx, id, "read", client.ToolCall{Params: []byte(`{"path":"/home/user/notes.txt"}`)}, nil); err != nil {
				t.Fatalf("tool call: %v", err)
			}
		}
		s, err := c.Snapshots.Turn(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		turns = append(turns, s)
	}
	forks, err := c.Snapshots.Fork(ctx, id, client.ForkRequest{SnapshotID: turns[1].SnapshotID, Metadata: map[string]string{"note": xssMeta}})
	if err != nil || len(forks) != 1 || forks[0].Sandbox == nil {
		t.Fatalf("fork: %v %+v", err, forks)
	}
	return forks[0].Sandbox.SandboxID
}

// uiTerminalRefusals checks the terminal WebSocket's door: no key, another
// team's key and another site's Origin are refused before any upgrade, and
// the right key (as the browser sends it, a subprotocol) is let in.
func uiTerminalRefusals(t *testing.T, d *daemon, id, otherKey string) {
	t.Helper()
	url := "http://" + d.addr + "/sandboxes/" + id + "/terminal"
	try := func(origin string, protocols ...string) int {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "websocket")
		req.Header.Set("Sec-WebSocket-Version", "13")
		req.Header.Set("Sec-WebSocket-Key", base64.StdEncoding.EncodeToString([]byte("0123456789abcdef")))
		req.Header.Set("Sec-WebSocket-Protocol", strings.Join(protocols, ", "))
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	keyProto := func(k string) string { return "warren.key." + base64.RawURLEncoding.EncodeToString([]byte(k)) }
	self := "http://" + d.addr
	for _, c := range []struct {
		name   string
		origin string
		protos []string
		want   int
	}{
		{"no key", self, []string{client.TerminalProtocol}, http.StatusUnauthorized},
		{"bad key", self, []string{client.TerminalProtocol, keyProto("nope")}, http.StatusUnauthorized},
		{"other team", self, []string{client.TerminalProtocol, keyProto(otherKey)}, http.StatusNotFound},
		{"other origin", "https://evil.example", []string{client.TerminalProtocol, keyProto(d.key)}, http.StatusForbidden},
		{"right key", self, []string{client.TerminalProtocol, keyProto(d.key)}, http.StatusSwitchingProtocols},
	} {
		if got := try(c.origin, c.protos...); got != c.want {
			t.Errorf("terminal with %s: status %d, want %d", c.name, got, c.want)
		}
	}
	// The CLI: warren shell, its stdin a pipe; it exits with the shell's code.
	out, errOut, code := d.cli("echo shell-$((40+2))\nexit 3\n", "shell", id)
	if code != 3 || !strings.Contains(out, "shell-42") {
		t.Errorf("warren shell: exit %d, output %q, stderr %q: want 3 and shell-42", code, out, errOut)
	}
	// The client's way: a header key, a command, its output.
	term, err := d.client().Sandboxes.Terminal(ctxT(t, time.Minute), id, 80, 24)
	if err != nil {
		t.Fatal(err)
	}
	defer term.Close()
	if _, err := term.Write([]byte("echo cli-$((40+2))\nexit 3\n")); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	for {
		data, exit, err := term.Next()
		if err != nil {
			t.Fatalf("terminal: %v (output %q)", err, buf.String())
		}
		if exit != nil {
			if exit.Code != 3 || !strings.Contains(buf.String(), "cli-42") {
				t.Errorf("shell exit %+v, output %q: want 3 and cli-42", exit, buf.String())
			}
			break
		}
		buf.Write(data)
	}
}

// runNodeScript runs one node script in dir with env added, logging its
// output, and fails the test when it fails.
func runNodeScript(ctx context.Context, t *testing.T, node, dir, script string, env ...string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	for _, l := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		t.Log(l)
	}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("%s did not finish in time: %v", script, ctx.Err())
	case errors.As(err, &ee):
		t.Fatalf("%s failed (exit %d): see above", script, ee.ExitCode())
	case err != nil:
		t.Fatalf("run %s: %v", script, err)
	}
}
