package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warrenhq/warren/client"
)

// fakeDaemon is an in-memory stand-in for `warren serve`'s API, enough to
// test the CLI's logic: flags to requests, answers to output and exit codes.
type fakeDaemon struct {
	t   *testing.T
	key string

	mu        sync.Mutex
	sandboxes map[string]client.SandboxDetail
	files     map[string][]byte // "id:path"
	lastBody  []byte
	lastQuery string
	pageSize  int
}

func newFakeDaemon(t *testing.T) (*fakeDaemon, string) {
	d := &fakeDaemon{t: t, key: "e2b_good", sandboxes: map[string]client.SandboxDetail{}, files: map[string][]byte{}, pageSize: 2}
	srv := httptest.NewServer(d)
	t.Cleanup(srv.Close)
	return d, srv.URL
}

func (d *fakeDaemon) fail(w http.ResponseWriter, code int, format string, a ...any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(client.Error{Code: code, Message: fmt.Sprintf(format, a...)})
}

func reply(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func (d *fakeDaemon) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-API-Key") != d.key {
		d.fail(w, 401, "invalid API key")
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	body, _ := io.ReadAll(r.Body)
	d.lastBody, d.lastQuery = body, r.URL.RawQuery
	q := r.URL.Query()
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	route := r.Method + " " + parts[0]
	if len(parts) > 1 && parts[0] == "sandboxes" {
		if _, ok := d.sandboxes[parts[1]]; !ok {
			d.fail(w, 404, "sandbox %s not found", parts[1])
			return
		}
		route = r.Method + " sandbox/" + strings.Join(parts[2:], "/")
	}
	id := ""
	if len(parts) > 1 {
		id = parts[1]
	}
	switch route {
	case "POST sandboxes":
		var in client.NewSandbox
		_ = json.Unmarshal(body, &in)
		sid := fmt.Sprintf("sb%d", len(d.sandboxes)+1)
		det := client.SandboxDetail{Sandbox: client.Sandbox{SandboxID: sid, TemplateID: in.TemplateID}, State: "running",
			CPUCount: 1, MemoryMB: 512, StartedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Metadata: in.Metadata}
		d.sandboxes[sid] = det
		reply(w, 201, det.Sandbox)
	case "GET v2":
		ids := make([]string, 0, len(d.sandboxes))
		for k := range d.sandboxes {
			ids = append(ids, k)
		}
		sort.Strings(ids)
		start, _ := strconv.Atoi(q.Get("nextToken"))
		end := min(start+d.pageSize, len(ids))
		page := []client.ListedSandbox{}
		for _, k := range ids[start:end] {
			page = append(page, d.sandboxes[k])
		}
		if end < len(ids) {
			w.Header().Set("X-Next-Token", strconv.Itoa(end))
		}
		reply(w, 200, page)
	case "GET sandbox/":
		reply(w, 200, d.sandboxes[id])
	case "DELETE sandbox/":
		delete(d.sandboxes, id)
		w.WriteHeader(204)
	case "POST sandbox/exec":
		d.exec(w, r, body)
	case "GET sandbox/files":
		b, ok := d.files[id+":"+q.Get("path")]
		if !ok {
			d.fail(w, 404, "file %s not found", q.Get("path"))
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(b)
	case "PUT sandbox/files":
		d.files[id+":"+q.Get("path")] = body
		reply(w, 200, client.EntryInfo{Path: q.Get("path"), Size: int64(len(body))})
	case "DELETE sandbox/files":
		delete(d.files, id+":"+q.Get("path"))
		w.WriteHeader(204)
	case "GET sandbox/files/list":
		reply(w, 200, []client.EntryInfo{
			{Name: "etc", Path: "/etc", Type: "dir", Size: 4096, Permissions: "drwxr-xr-x", Owner: "root"},
			{Name: "sh", Path: "/sh", Type: "symlink", SymlinkTarget: "/bin/busybox", Mode: 0o777, Owner: "root"},
		})
	case "GET sandbox/files/stat", "POST sandbox/files/mkdir":
		reply(w, 200, client.EntryInfo{Path: q.Get("path"), Type: "dir", Owner: "user", Group: "user"})
	case "POST sandbox/files/move":
		var m client.MoveRequest
		_ = json.Unmarshal(body, &m)
		reply(w, 200, client.EntryInfo{Path: m.Destination})
	case "GET templates":
		reply(w, 200, []client.Template{{TemplateID: "base", Source: "debootstrap", SizeBytes: 300 << 20}})
	case "DELETE templates":
		if id != "base" {
			d.fail(w, 404, "template %s not found", id)
			return
		}
		w.WriteHeader(204)
	case "POST api-keys":
		var in client.NewAPIKey
		_ = json.Unmarshal(body, &in)
		reply(w, 201, client.APIKey{ID: "k1", Team: in.Team, Name: in.Name, Prefix: "e2b_12", Key: "e2b_1234secret"})
	case "GET api-keys":
		reply(w, 200, []client.APIKey{{ID: "k1", Team: "t", Prefix: "e2b_12"}})
	case "DELETE api-keys":
		w.WriteHeader(204)
	default:
		d.fail(w, 404, "no route %s %s", r.Method, r.URL.Path)
	}
}

// exec answers like the daemon: the request's Command (or Cmd[0]) picks
// the fake behaviour.
func (d *fakeDaemon) exec(w http.ResponseWriter, r *http.Request, body []byte) {
	var req client.ExecRequest
	_ = json.Unmarshal(body, &req)
	what := req.Command
	if len(req.Cmd) > 0 {
		what = req.Cmd[0]
	}
	code := int32(0)
	ev := client.ExecEvent{Type: "exit", ExitCode: &code}
	out := "ran " + strings.Join(req.Cmd, ",") + req.Command
	switch what {
	case "exit3":
		code = 3
	case "killed":
		ev.ExitCode, ev.Signal = nil, "SIGKILL"
	case "sleep":
		ev.TimedOut = true
	case "missing":
		ev.ExitCode, ev.Error = nil, "executable not found"
	case "cat":
		out = string(req.Stdin)
	}
	if r.URL.Query().Get("wait") == "true" {
		res := client.ExecResult{PID: 9, Stdout: out, Signal: ev.Signal, TimedOut: ev.TimedOut, Error: ev.Error}
		if ev.ExitCode != nil {
			res.ExitCode = *ev.ExitCode
		}
		reply(w, 200, res)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	enc := json.NewEncoder(w)
	_ = enc.Encode(client.ExecEvent{Type: "start", PID: 9})
	_ = enc.Encode(client.ExecEvent{Type: "stdout", Data: []byte(out)})
	_ = enc.Encode(client.ExecEvent{Type: "stderr", Data: []byte("E")})
	_ = enc.Encode(ev)
}

type result struct {
	code           int
	stdout, stderr string
}

// cli runs the CLI in-process against url with the given environment.
func cli(t *testing.T, env map[string]string, stdin string, argv ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	getenv := func(k string) string { return env[k] }
	code := run(context.Background(), argv, strings.NewReader(stdin), &out, &errOut, getenv)
	return result{code, out.String(), errOut.String()}
}

func (r result) must(t *testing.T, code int) result {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit code %d, want %d\nstdout: %s\nstderr: %s", r.code, code, r.stdout, r.stderr)
	}
	return r
}

func TestCLISandboxes(t *testing.T) {
	d, url := newFakeDaemon(t)
	env := map[string]string{"WARREN_URL": url, "WARREN_API_KEY": "e2b_good"}

	r := cli(t, env, "", "sandbox", "create", "--template", "base", "--timeout", "0", "--memory-mb", "256",
		"--cpus", "0.5", "--meta", "owner=alice", "--meta", "x=a=b", "--env", "FOO=bar").must(t, 0)
	if r.stdout != "sb1\n" {
		t.Fatalf("create printed %q", r.stdout)
	}
	var in client.NewSandbox
	if err := json.Unmarshal(d.lastBody, &in); err != nil {
		t.Fatal(err)
	}
	if in.TemplateID != "base" || in.Timeout == nil || *in.Timeout != 0 || in.Limits == nil || in.Limits.MemoryMB != 256 ||
		in.Limits.CPUCount != 0.5 || in.Metadata["x"] != "a=b" || in.EnvVars["FOO"] != "bar" {
		t.Fatalf("create sent %s", d.lastBody)
	}
	cli(t, env, "", "sandbox", "create").must(t, 0)
	if strings.Contains(string(d.lastBody), "timeout") || strings.Contains(string(d.lastBody), "limits") {
		t.Fatalf("unset flags were sent: %s", d.lastBody)
	}
	r = cli(t, env, "", "sandbox", "create", "--json").must(t, 0)
	var sb client.Sandbox
	if err := json.Unmarshal([]byte(r.stdout), &sb); err != nil || sb.SandboxID != "sb3" {
		t.Fatalf("create --json printed %q (%v)", r.stdout, err)
	}

	// Three sandboxes, two per page: ls must follow X-Next-Token.
	r = cli(t, env, "", "sandbox", "ls", "--state", "running", "--meta", "owner=alice").must(t, 0)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "ID") || !strings.HasPrefix(lines[3], "sb3") ||
		!strings.Contains(lines[1], "512MiB") {
		t.Fatalf("ls printed:\n%s", r.stdout)
	}
	if !strings.Contains(d.lastQuery, "state=running") || !strings.Contains(d.lastQuery, "metadata=owner%3Dalice") {
		t.Fatalf("ls query %q", d.lastQuery)
	}
	if !strings.Contains(d.lastQuery, "order=desc") || strings.Contains(d.lastQuery, "startedAfter") {
		t.Fatalf("ls query %q: want the latest first and no time bound", d.lastQuery)
	}
	cli(t, env, "", "sandbox", "ls", "--order", "asc", "--since", "2025-06-01T12:00:00Z", "--template", "py").must(t, 0)
	if q := d.lastQuery; !strings.Contains(q, "order=asc") || !strings.Contains(q, "startedAfter=2025-06-01T12%3A00%3A00Z") || !strings.Contains(q, "template=py") {
		t.Fatalf("ls query %q", q)
	}
	for flag, msg := range map[string]string{"--order=newest": `--order "newest"`, "--since=yesterday": `--since "yesterday"`, "--since=-1h": `--since "-1h"`} {
		if r := cli(t, env, "", "sandbox", "ls", flag).must(t, 1); !strings.Contains(r.stderr, msg) {
			t.Fatalf("ls %s: stderr %q", flag, r.stderr)
		}
	}
	r = cli(t, env, "", "--json", "sandbox", "ls").must(t, 0)
	var listed []client.ListedSandbox
	if err := json.Unmarshal([]byte(r.stdout), &listed); err != nil || len(listed) != 3 {
		t.Fatalf("ls --json printed %q (%v)", r.stdout, err)
	}

	r = cli(t, env, "", "sandbox", "get", "sb1").must(t, 0)
	if !strings.Contains(r.stdout, "owner=alice x=a=b") || !strings.Contains(r.stdout, "running") {
		t.Fatalf("get printed:\n%s", r.stdout)
	}

	r = cli(t, env, "", "sandbox", "rm", "sb1", "nope", "sb2").must(t, 1)
	if r.stdout != "sb1\nsb2\n" || r.stderr != "error: sandbox nope not found\n" {
		t.Fatalf("rm: stdout %q stderr %q", r.stdout, r.stderr)
	}
	r = cli(t, env, "", "sandbox", "get", "sb1").must(t, 1)
	if r.stderr != "error: sandbox sb1 not found\n" {
		t.Fatalf("get of a removed sandbox: %q", r.stderr)
	}
}

func TestCLIUsageErrors(t *testing.T) {
	_, url := newFakeDaemon(t)
	env := map[string]string{"WARREN_URL": url, "WARREN_API_KEY": "e2b_good"}
	r := cli(t, env, "", "sandbox", "get").must(t, 1)
	if !strings.Contains(r.stderr, "error: accepts 1 arg(s)") || !strings.Contains(r.stderr, "Run 'warren sandbox get --help'") {
		t.Fatalf("stderr %q", r.stderr)
	}
	r = cli(t, env, "", "sandbox", "create", "--meta", "novalue").must(t, 1)
	if !strings.Contains(r.stderr, `--meta "novalue": want KEY=VALUE`) {
		t.Fatalf("stderr %q", r.stderr)
	}
	r = cli(t, env, "", "sandbox", "create", "--bogus").must(t, 1)
	if !strings.Contains(r.stderr, "unknown flag: --bogus") {
		t.Fatalf("stderr %q", r.stderr)
	}
	cli(t, env, "", "key", "create").must(t, 1) // --team is required
}

func TestCLIAuth(t *testing.T) {
	_, url := newFakeDaemon(t)
	dir := t.TempDir()
	env := map[string]string{"WARREN_URL": url, "WARREN_DATA_DIR": dir}

	r := cli(t, env, "", "sandbox", "ls").must(t, 1)
	if !strings.Contains(r.stderr, "invalid API key (no API key found") || !strings.Contains(r.stderr, filepath.Join(dir, "admin.key")) {
		t.Fatalf("stderr %q", r.stderr)
	}
	if err := os.WriteFile(filepath.Join(dir, "admin.key"), []byte("e2b_good\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cli(t, env, "", "sandbox", "ls").must(t, 0)
	// A flag beats the environment, which beats the file.
	env["WARREN_API_KEY"] = "e2b_bad"
	r = cli(t, env, "", "sandbox", "ls").must(t, 1)
	if !strings.Contains(r.stderr, "$WARREN_API_KEY was refused") {
		t.Fatalf("stderr %q", r.stderr)
	}
	cli(t, env, "", "--api-key", "e2b_good", "sandbox", "ls").must(t, 0)
	// --url beats $WARREN_URL.
	r = cli(t, env, "", "--url", "http://127.0.0.1:1", "--api-key", "e2b_good", "sandbox", "ls").must(t, 1)
	if !strings.Contains(r.stderr, "cannot reach warren at http://127.0.0.1:1") {
		t.Fatalf("stderr %q", r.stderr)
	}
}

func TestCLIExec(t *testing.T) {
	_, url := newFakeDaemon(t)
	env := map[string]string{"WARREN_URL": url, "WARREN_API_KEY": "e2b_good"}
	cli(t, env, "", "sandbox", "create").must(t, 0)

	r := cli(t, env, "", "exec", "sb1", "--", "ls", "-la", "/").must(t, 0)
	if r.stdout != "ran ls,-la,/" || r.stderr != "E" {
		t.Fatalf("stdout %q stderr %q", r.stdout, r.stderr)
	}
	r = cli(t, env, "", "exec", "--shell", "sb1", "--", "echo", "$HOME", "|", "wc").must(t, 0)
	if r.stdout != "ran echo $HOME | wc" {
		t.Fatalf("--shell stdout %q", r.stdout)
	}
	r = cli(t, env, "piped in", "exec", "--stdin", "sb1", "cat").must(t, 0)
	if r.stdout != "piped in" {
		t.Fatalf("--stdin stdout %q", r.stdout)
	}
	cli(t, env, "", "exec", "sb1", "exit3").must(t, 3)
	r = cli(t, env, "", "exec", "sb1", "killed").must(t, 137)
	if !strings.Contains(r.stderr, "killed by signal SIGKILL") {
		t.Fatalf("stderr %q", r.stderr)
	}
	cli(t, env, "", "exec", "--timeout", "1s", "sb1", "sleep").must(t, 124)
	r = cli(t, env, "", "exec", "sb1", "missing").must(t, 255)
	if !strings.Contains(r.stderr, "executable not found") {
		t.Fatalf("stderr %q", r.stderr)
	}
	r = cli(t, env, "", "exec", "nope", "ls").must(t, 255)
	if !strings.Contains(r.stderr, "error: sandbox nope not found") {
		t.Fatalf("stderr %q", r.stderr)
	}
	cli(t, env, "", "exec", "--bogus", "sb1", "ls").must(t, 255)
	cli(t, env, "", "exec", "sb1").must(t, 255)
	cli(t, env, "", "exec", "--timeout", "-1s", "sb1", "ls").must(t, 255)

	r = cli(t, env, "", "exec", "--json", "sb1", "exit3").must(t, 3)
	var res client.ExecResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || res.ExitCode != 3 || res.Stdout != "ran exit3" {
		t.Fatalf("--json printed %q (%v)", r.stdout, err)
	}
}

func TestCLIFiles(t *testing.T) {
	d, url := newFakeDaemon(t)
	env := map[string]string{"WARREN_URL": url, "WARREN_API_KEY": "e2b_good"}
	cli(t, env, "", "sandbox", "create").must(t, 0)

	cli(t, env, "hello", "files", "put", "--mode", "0600", "--user", "root", "sb1", "-", "/tmp/a.txt").must(t, 0)
	if !strings.Contains(d.lastQuery, "mode=0600") || !strings.Contains(d.lastQuery, "user=root") {
		t.Fatalf("put query %q", d.lastQuery)
	}
	local := filepath.Join(t.TempDir(), "src")
	if err := os.WriteFile(local, []byte("from disk"), 0o644); err != nil {
		t.Fatal(err)
	}
	cli(t, env, "", "files", "put", "sb1", local, "/tmp/b.txt").must(t, 0)

	r := cli(t, env, "", "files", "get", "sb1", "/tmp/a.txt").must(t, 0)
	if r.stdout != "hello" {
		t.Fatalf("get to stdout: %q", r.stdout)
	}
	dir := t.TempDir()
	cli(t, env, "", "files", "get", "sb1", "/tmp/b.txt", dir).must(t, 0)
	if b, err := os.ReadFile(filepath.Join(dir, "b.txt")); err != nil || string(b) != "from disk" {
		t.Fatalf("get into a directory: %q, %v", b, err)
	}
	// A failed get leaves nothing behind.
	r = cli(t, env, "", "files", "get", "sb1", "/missing", filepath.Join(dir, "m")).must(t, 1)
	if !strings.Contains(r.stderr, "file /missing not found") {
		t.Fatalf("stderr %q", r.stderr)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("leftovers in %s: %v", dir, entries)
	}

	r = cli(t, env, "", "files", "ls", "sb1", "/").must(t, 0)
	if !strings.Contains(r.stdout, "NAME") || !strings.Contains(r.stdout, "sh -> /bin/busybox") || !strings.Contains(r.stdout, "drwxr-xr-x") {
		t.Fatalf("ls printed:\n%s", r.stdout)
	}
	r = cli(t, env, "", "files", "stat", "sb1", "/etc").must(t, 0)
	if !strings.Contains(r.stdout, "user:user") {
		t.Fatalf("stat printed:\n%s", r.stdout)
	}
	cli(t, env, "", "files", "mkdir", "sb1", "/d").must(t, 0)
	r = cli(t, env, "", "--json", "files", "mv", "sb1", "/a", "/b").must(t, 0)
	if !strings.Contains(r.stdout, `"path": "/b"`) {
		t.Fatalf("mv --json printed %q", r.stdout)
	}
	cli(t, env, "", "files", "rm", "sb1", "/tmp/a.txt").must(t, 0)
	cli(t, env, "", "files", "get", "sb1", "/tmp/a.txt").must(t, 1)
}

func TestCLIKeysAndTemplates(t *testing.T) {
	d, url := newFakeDaemon(t)
	env := map[string]string{"WARREN_URL": url, "WARREN_API_KEY": "e2b_good"}

	r := cli(t, env, "", "key", "create", "--team", "acme", "--name", "ci").must(t, 0)
	if r.stdout != "e2b_1234secret\n" || !strings.Contains(r.stderr, "not shown again") {
		t.Fatalf("key create: stdout %q stderr %q", r.stdout, r.stderr)
	}
	if string(d.lastBody) != `{"team":"acme","name":"ci"}` {
		t.Fatalf("key create sent %s", d.lastBody)
	}
	r = cli(t, env, "", "key", "ls").must(t, 0)
	if !strings.Contains(r.stdout, "LAST USED") || !strings.Contains(r.stdout, "e2b_12") {
		t.Fatalf("key ls printed:\n%s", r.stdout)
	}
	cli(t, env, "", "key", "revoke", "k1").must(t, 0)

	r = cli(t, env, "", "template", "ls").must(t, 0)
	if !strings.Contains(r.stdout, "base") || !strings.Contains(r.stdout, "300MiB") {
		t.Fatalf("template ls printed:\n%s", r.stdout)
	}
	cli(t, env, "", "template", "rm", "base").must(t, 0)
	cli(t, env, "", "template", "rm", "other").must(t, 1)
}

func TestCLITreeHasLeadCommands(t *testing.T) {
	root := newRootCmd(&app{getenv: func(string) string { return "" }})
	for _, path := range [][]string{{"serve"}, {"bench"}, {"template", "build"}} {
		cmd, _, err := root.Find(path)
		if err != nil || cmd.Name() != path[len(path)-1] {
			t.Errorf("command %v not registered (%v)", path, err)
		}
	}
}
