package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/tplbuild"
)

// TestTemplateBuildFile builds a template from steps with the CLI, as the
// SDK's Template.toJSON writes them (`warren template build --file`):
// the build runs in a sandbox through the template build API, a second
// build is all cached and uploads nothing, and a bad step is refused.
func TestTemplateBuildFile(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.start()
	d.mustCLI("template", "build", "mini", "--busybox", "--data-dir", d.dataDir)
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "app"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "app", "a.txt"), []byte("from the context\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := `{"fromTemplate": "mini", "steps": [
		{"type": "WORKDIR", "args": ["/"]},
		{"type": "USER", "args": ["root"]},
		{"type": "COPY", "args": ["app", "/app", "", ""]},
		{"type": "ENV", "args": ["WHO", "cli"]},
		{"type": "RUN", "args": ["cat /app/a.txt > /out && echo $WHO >> /out"]}
	]}`
	file := filepath.Join(dir, "template.json")
	if err := os.WriteFile(file, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	out, logs, code := d.cli("", "template", "build", "from-file", "--file", file, "--tag", "v1")
	if code != 0 || !strings.Contains(out, "built template") {
		t.Fatalf("first build: exit %d\n%s\n%s", code, out, logs)
	}
	out, logs, code = d.cli("", "template", "build", "from-file", "--file", file)
	if code != 0 || strings.Count(logs, "CACHED") != 5 || !strings.Contains(logs, "skipping upload of app") {
		t.Fatalf("second build: want every step cached and no upload: exit %d\n%s\n%s", code, out, logs)
	}
	ctx := context.Background()
	c := d.client()
	sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "from-file:v1"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Commands.ExecWait(ctx, sb.SandboxID, client.ExecRequest{Cmd: []string{"cat", "/out"}, User: "root"})
	if err != nil || res.Stdout != "from the context\ncli\n" {
		t.Fatalf("the template's file: %q %v", res.Stdout, err)
	}
	if cache := d.mustCLI("template", "cache"); strings.Count(cache, "\n") < 6 {
		t.Errorf("warren template cache lists fewer than five entries:\n%s", cache)
	}
	// template ls shows the built template beside the server's own: its
	// last build ready with all five steps cached, two builds, tag v1
	// (and the default tag the CLI gives every build).
	ls := d.mustCLI("template", "ls")
	if !regexp.MustCompile(`(?m)^from-file\s+build tpl\S+: ready, 5/5 steps cached, 2 builds, tags (default,)?v1`).MatchString(ls) || !strings.Contains(ls, "mini") {
		t.Errorf("warren template ls:\n%s", ls)
	}
	if sb.TemplateID == "from-file" || !strings.HasPrefix(sb.TemplateID, "tpl") {
		t.Errorf("a sandbox of from-file:v1 reports template %q, want the template's id", sb.TemplateID)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"fromTemplate": "mini", "steps": [{"type": "FROB", "args": ["x"]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := d.cli("", "template", "build", "bad-one", "--file", bad); code == 0 || !strings.Contains(errOut, "unknown step type") {
		t.Errorf("an unknown step type: exit %d, %s", code, errOut)
	}
	buildLogAfterRestart(t, d)
	chainAndDelete(t, d, dir)
}

// chainAndDelete: a template built from a built template shows its parent
// chain and cache hits in template ls and its builds in template show; the
// parent cannot be deleted while it has a dependant (409 naming it); a
// delete takes the template's build logs off the disk.
func chainAndDelete(t *testing.T, d *daemon, dir string) {
	file := filepath.Join(dir, "child.json")
	if err := os.WriteFile(file, []byte(`{"fromTemplate": "from-file", "steps": [{"type": "RUN", "args": ["echo child > /tmp/child"]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	d.mustCLI("template", "build", "child", "--file", file)
	ls := d.mustCLI("template", "ls")
	if !regexp.MustCompile(`(?m)^child\s+build tpl\S+: ready, 0/1 steps cached, 1 builds, tags default, chain child ← from-file ← mini\s`).MatchString(ls) ||
		!regexp.MustCompile(`(?m)^from-file\s+.*5/5 steps cached, 2 builds, .*chain from-file ← mini\s`).MatchString(ls) {
		t.Errorf("warren template ls:\n%s", ls)
	}
	show := d.mustCLI("template", "show", "child")
	if !strings.Contains(show, "chain     child ← from-file ← mini") || !regexp.MustCompile(`\sready\s+0/1\s+\S+s\s+from-file \(build \S+\)\s+default`).MatchString(show) {
		t.Errorf("warren template show child:\n%s", show)
	}
	logs := func() []string {
		m, _ := filepath.Glob(filepath.Join(d.dataDir, "template-files", ".build-logs", "*.json"))
		return m
	}
	if n := len(logs()); n != 3 {
		t.Fatalf("%d build log files, want 3 (two builds of from-file, one of child): %v", n, logs())
	}
	if _, errOut, code := d.cli("", "template", "rm", "from-file"); code == 0 || !strings.Contains(errOut, "parent of") || !strings.Contains(errOut, "child") {
		t.Fatalf("deleting a parent: exit %d, %s", code, errOut)
	}
	d.mustCLI("template", "rm", "child")
	if n := len(logs()); n != 2 {
		t.Fatalf("after deleting child: %d build log files, want 2", n)
	}
	d.mustCLI("template", "rm", "from-file")
	if n := len(logs()); n != 0 {
		t.Fatalf("after deleting from-file: %d build log files, want none: %v", n, logs())
	}
}

// buildLogAfterRestart: a finished build's status still shows its log
// after the daemon restarts (the log is kept on disk, not only in memory).
func buildLogAfterRestart(t *testing.T, d *daemon) {
	ctx := context.Background()
	d.stop(syscall.SIGTERM)
	d.start()
	ts, err := d.client().Templates.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tpl := range ts {
		if len(tpl.Aliases) == 0 || tpl.Aliases[0] != "from-file" {
			continue
		}
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+d.addr+"/templates/"+tpl.TemplateID+"/builds/"+tpl.BuildID+"/status", nil)
		req.Header.Set("X-API-Key", d.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var st tplbuild.Status
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || st.Status != "ready" || len(st.LogEntries) < 6 ||
			!strings.Contains(st.LogEntries[len(st.LogEntries)-1].Message, "Build finished") {
			t.Fatalf("status after a restart: %d %+v %v", resp.StatusCode, st, err)
		}
		return
	}
	t.Fatalf("no from-file in GET /templates: %+v", ts)
}
