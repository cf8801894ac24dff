package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/client"
)

// startMemorySpec is a template with a start command (busybox httpd on
// 8080) and a ready command; every run of the start command appends the
// time (s) to /srv/starts, so a sandbox tells when, and how often, its
// server was started.
const startMemorySpec = `{"fromTemplate": "bb", "startCmd": %q, "readyCmd": "wget -qO- http://127.0.0.1:8080/index.html", "steps": [
	{"type": "USER", "args": ["root"]},
	{"type": "WORKDIR", "args": ["/"]},
	{"type": "RUN", "args": ["mkdir -p /srv && echo hello > /srv/index.html"]},
	{"type": "WORKDIR", "args": ["/srv"]}
]}`

const startMemoryCmd = `date +%s >> /srv/starts; exec httpd -f -p 8080 -h /srv`

// writeSpec writes a template JSON file with the start command.
func writeSpec(t *testing.T, startCmd string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "template.json")
	body := strings.Replace(startMemorySpec, "%q", strconv.Quote(startCmd), 1)
	if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// starts reads a sandbox's /srv/starts: one line per start command run.
func starts(t *testing.T, ctx context.Context, c *client.Client, id string) []int64 {
	t.Helper()
	res, err := c.Commands.ExecWait(ctx, id, client.ExecRequest{Cmd: []string{"cat", "/srv/starts"}, User: "root"})
	if err != nil {
		t.Fatalf("sandbox %s: read /srv/starts: %v", id, err)
	}
	var out []int64
	for _, l := range strings.Fields(res.Stdout) {
		n, err := strconv.ParseInt(l, 10, 64)
		if err != nil || n <= 0 {
			t.Fatalf("sandbox %s: /srv/starts holds %q", id, res.Stdout)
		}
		out = append(out, n)
	}
	return out
}

// A template built on gvisor with a start command is snapshotted with
// memory once ready: its creates answer on the port at once, the server
// started once, in the build, before them; each sandbox is its own (id,
// hostname, env, files, address). Built on native, the same template runs
// the start command at each create, and says so. A rebuild with only the
// start command changed reuses every cached step and drops the old
// build's memory; deleting the template drops the new one. A runtime the
// server does not have is refused.
func TestTemplateStartMemory(t *testing.T) {
	t.Parallel()
	d := gvisorDaemon(t)
	ctx := ctxT(t, 6*time.Minute)
	c := d.client()
	file := writeSpec(t, startMemoryCmd)

	out, logs, code := d.cli("", "template", "build", "web-mem", "--file", file, "--runtime", "gvisor")
	if code != 0 || !strings.Contains(logs, "Start command snapshotted with memory") {
		t.Fatalf("gvisor build: exit %d\n%s\n%s", code, out, logs)
	}
	out, logs, code = d.cli("", "template", "build", "web-cold", "--file", file, "--runtime", "native")
	if code != 0 || !strings.Contains(logs, "start command run at each create") {
		t.Fatalf("native build: exit %d\n%s\n%s", code, out, logs)
	}
	ls := d.mustCLI("template", "ls")
	if !strings.Contains(lineOf(ls, "web-mem"), "start command snapshotted with memory") ||
		!strings.Contains(lineOf(ls, "web-cold"), "start command run at each create") {
		t.Errorf("warren template ls does not say the start modes:\n%s", ls)
	}

	// The builds' start commands ran at least a second before this.
	time.Sleep(1100 * time.Millisecond)
	before := time.Now().Unix()
	var ids []string
	for i, who := range []string{"a", "b"} {
		sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "web-mem", EnvVars: map[string]string{"WHO": who}})
		if err != nil {
			t.Fatalf("create %d of web-mem: %v", i, err)
		}
		ids = append(ids, sb.SandboxID)
		checkWarm(t, ctx, d, sb.SandboxID, who, before)
	}
	// Each sandbox is its own: a file written in one is not in the other.
	if _, err := c.Commands.ExecWait(ctx, ids[0], client.ExecRequest{Cmd: []string{"sh", "-c", "echo mine > /srv/mine"}, User: "root"}); err != nil {
		t.Fatal(err)
	}
	if res, err := c.Commands.ExecWait(ctx, ids[1], sh("test -e /srv/mine && echo shared || echo own")); err != nil || res.Stdout != "own\n" {
		t.Errorf("the second sandbox sees the first's file: %+v, %v", res, err)
	}

	// Native: the start command runs in the create, after it began.
	cold, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "web-cold"})
	if err != nil {
		t.Fatal(err)
	}
	if s := starts(t, ctx, c, cold.SandboxID); len(s) != 1 || s[0] < before {
		t.Errorf("a native create's start command: runs %v, want one after %d", s, before)
	}
	if code, body := getIndex(t, ctx, d, d.key, map[string]string{"E2b-Sandbox-Id": cold.SandboxID, "E2b-Sandbox-Port": "8080"}, ""); code != 200 || body != "hello\n" {
		t.Errorf("native sandbox's server: %d %q", code, body)
	}
	// A create of the memory template asking for native, or for files
	// only, starts from its files and runs the start command.
	for _, ns := range []client.NewSandbox{{TemplateID: "web-mem", Runtime: "native"}, {TemplateID: "web-mem", FilesOnly: true}} {
		sb, err := c.Sandboxes.Create(ctx, ns)
		if err != nil {
			t.Fatalf("create %+v: %v", ns, err)
		}
		if s := starts(t, ctx, c, sb.SandboxID); len(s) != 1 || s[0] < before {
			t.Errorf("create %+v: start command runs %v, want one after %d", ns, s, before)
		}
	}
	checkStartModes(t, ctx, c)
	checkRequiredRuntime(t, d, file)

	// Only the start command changed: every step cached, a new memory
	// snapshot, the old build's dropped.
	out, logs, code = d.cli("", "template", "build", "web-mem", "--file", writeSpec(t, "true; "+startMemoryCmd), "--runtime", "gvisor")
	if code != 0 || strings.Count(logs, "CACHED") != 4 || !strings.Contains(logs, "Start command snapshotted with memory") {
		t.Fatalf("rebuild with a new start command: exit %d\n%s\n%s", code, out, logs)
	}
	// Two images: web-mem's new build's and web-strong's.
	waitFor(t, 30*time.Second, "two memory images left after the rebuild", func() bool { return memoryImageCount(d) == 2 })
	time.Sleep(1100 * time.Millisecond)
	before = time.Now().Unix()
	sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "web-mem"})
	if err != nil {
		t.Fatal(err)
	}
	checkWarm(t, ctx, d, sb.SandboxID, "", before)
	if err := c.Templates.Delete(ctx, "web-mem"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "only web-strong's memory image left after web-mem's delete", func() bool { return memoryImageCount(d) == 1 })

	_, errOut, code := d.cli("", "template", "build", "web-bad", "--file", file, "--runtime", "kvm")
	if code == 0 || !strings.Contains(errOut, `runtime "kvm": want one of`) {
		t.Errorf("a build on an unknown runtime: exit %d, %s", code, errOut)
	}
}

// checkWarm: a sandbox of a template snapshotted with memory answers on
// its port at once, through the daemon's proxy (its own address), with a
// server started once, in the build (before the create), and the identity
// and env of its own.
func checkWarm(t *testing.T, ctx context.Context, d *daemon, id, who string, before int64) {
	t.Helper()
	c := d.client()
	if code, body := getIndex(t, ctx, d, d.key, map[string]string{"E2b-Sandbox-Id": id, "E2b-Sandbox-Port": "8080"}, ""); code != 200 || body != "hello\n" {
		t.Errorf("sandbox %s: the server does not answer at once: %d %q", id, code, body)
	}
	if s := starts(t, ctx, c, id); len(s) != 1 || s[0] >= before {
		t.Errorf("sandbox %s: start command runs %v; want one, in the build (before %d)", id, s, before)
	}
	// The build's last USER and WORKDIR are the defaults, memory restored too.
	res, err := c.Commands.ExecWait(ctx, id, sh("hostname; echo $WHO; id -un; pwd"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("sandbox %s: hostname, WHO, user and cwd: %q", id, res.Stdout)
	if want := id + "\n" + who + "\nroot\n/srv\n"; res.Stdout != want {
		t.Errorf("sandbox %s: hostname, env, user and cwd %q, want %q", id, res.Stdout, want)
	}
}

// checkStartModes: GET /templates says each built template's start mode.
func checkStartModes(t *testing.T, ctx context.Context, c *client.Client) {
	t.Helper()
	ts, err := c.Templates.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	modes := map[string]string{}
	for _, tm := range ts {
		if len(tm.Aliases) > 0 {
			modes[tm.Aliases[0]] = tm.StartMode
		}
	}
	if modes["web-mem"] != "start command snapshotted with memory" || modes["web-cold"] != "start command run at each create" {
		t.Errorf("GET /templates start modes: %v", modes)
	}
}

// checkRequiredRuntime: a build naming no runtime from a parent that
// requires gvisor runs on gvisor, and snapshots its start command with
// memory.
func checkRequiredRuntime(t *testing.T, d *daemon, file string) {
	t.Helper()
	d.mustCLI("template", "build", "strong", "--busybox", "--runtime", "gvisor", "--data-dir", d.dataDir)
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	strong := filepath.Join(t.TempDir(), "strong.json")
	if err := os.WriteFile(strong, []byte(strings.Replace(string(raw), `"fromTemplate": "bb"`, `"fromTemplate": "strong"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, logs, code := d.cli("", "template", "build", "web-strong", "--file", strong)
	if code != 0 || !strings.Contains(logs, "on the gvisor runtime") || !strings.Contains(logs, "Start command snapshotted with memory") {
		t.Errorf("a build from a gvisor-only parent: exit %d\n%s\n%s", code, out, logs)
	}
}

// memoryImageCount counts the snapshots' memory images on the daemon's disk.
func memoryImageCount(d *daemon) int {
	entries, _ := os.ReadDir(filepath.Join(d.dataDir, "memory"))
	n := 0
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "snapshot-") {
			n++
		}
	}
	return n
}

// lineOf is the first line of out that starts with name.
func lineOf(out, name string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, name+" ") {
			return l
		}
	}
	return ""
}

// Without a usable runsc a build asking for gvisor is refused with the
// reason (400), before anything runs.
func TestTemplateStartMemoryNoRunsc(t *testing.T) {
	t.Parallel()
	d := busyboxDaemon(t, "--runsc", "/nonexistent/runsc")
	_, errOut, code := d.cli("", "template", "build", "web-mem", "--file", writeSpec(t, startMemoryCmd), "--runtime", "gvisor")
	if code == 0 || !strings.Contains(errOut, "not available") || !strings.Contains(errOut, "runsc") || !strings.Contains(errOut, "400") {
		t.Errorf("a gvisor build without runsc: exit %d, %s", code, errOut)
	}
}

// On a server whose default runtime is gvisor a build naming no runtime
// (as the SDK's never do) runs there and snapshots its start command with
// memory; its creates answer at once with the server the build started.
func TestTemplateStartMemoryDefaultRuntime(t *testing.T) {
	t.Parallel()
	d := gvisorDaemon(t, "--default-runtime", "gvisor")
	ctx := ctxT(t, 3*time.Minute)
	out, logs, code := d.cli("", "template", "build", "web-def", "--file", writeSpec(t, startMemoryCmd))
	if code != 0 || !strings.Contains(logs, "on the gvisor runtime") || !strings.Contains(logs, "Start command snapshotted with memory") {
		t.Fatalf("build on the default runtime: exit %d\n%s\n%s", code, out, logs)
	}
	time.Sleep(1100 * time.Millisecond)
	before := time.Now().Unix()
	sb, err := d.client().Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "web-def", EnvVars: map[string]string{"WHO": "sdk"}})
	if err != nil {
		t.Fatal(err)
	}
	checkWarm(t, ctx, d, sb.SandboxID, "sdk", before)
}
