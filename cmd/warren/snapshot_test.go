package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/client"
)

// snapFake adds the snapshot routes to fakeDaemon: it answers them itself
// and hands every other request to the sandbox fake.
type snapFake struct {
	*fakeDaemon
	snaps   map[string]client.Snapshot
	turns   map[string]int // sandbox → last turn
	lineage client.Lineage
}

func newSnapFake(t *testing.T) (*snapFake, map[string]string) {
	d := &fakeDaemon{t: t, key: "e2b_good", sandboxes: map[string]client.SandboxDetail{}, files: map[string][]byte{}, pageSize: 2}
	f := &snapFake{fakeDaemon: d, snaps: map[string]client.Snapshot{}, turns: map[string]int{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, map[string]string{"WARREN_URL": srv.URL, "WARREN_API_KEY": "e2b_good"}
}

func (f *snapFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if r.Header.Get("X-API-Key") != f.key {
		f.fakeDaemon.ServeHTTP(w, r)
		return
	}
	f.mu.Lock()
	f.lastBody, f.lastQuery = body, r.URL.RawQuery
	handled := true
	switch {
	case r.Method == "GET" && r.URL.Path == "/snapshots":
		f.list(w, r)
	case len(parts) >= 2:
		handled = f.route(w, r, parts, body)
	default:
		handled = false
	}
	f.mu.Unlock()
	if !handled {
		f.fakeDaemon.ServeHTTP(w, r)
	}
}

// route answers the snapshot routes; false hands the request on.
func (f *snapFake) route(w http.ResponseWriter, r *http.Request, parts []string, body []byte) bool {
	q := r.URL.Query()
	if parts[0] == "snapshots" {
		s, ok := f.snaps[parts[1]]
		if !ok {
			f.fail(w, 404, "snapshot %s not found", parts[1])
			return true
		}
		switch {
		case r.Method == "GET" && len(parts) == 2:
			reply(w, 200, s)
		case r.Method == "DELETE" && len(parts) == 2:
			s.State = "deleted"
			f.snaps[s.SnapshotID] = s
			w.WriteHeader(204)
		case r.Method == "GET" && len(parts) == 3 && parts[2] == "diff":
			reply(w, 200, client.Diff{From: s.SnapshotID, To: q.Get("to"), Added: 1, Modified: 2, Removed: 1, TookMs: 1.5,
				Changes: []client.DiffEntry{
					{Path: "/workspace/new.txt", Change: "added", Type: "file", Size: 1229},
					{Path: "/workspace/a.txt", Change: "modified", Type: "file", OldSize: 10, Size: 12, Mode: 0o644, OldMode: 0o644,
						Diff: "--- a/workspace/a.txt\n+++ b/workspace/a.txt\n@@ -1 +1 @@\n-hello\n+hello!!"},
					{Path: "/workspace/run.sh", Change: "modified", Type: "file", OldSize: 5, Size: 5, Mode: 0o100755, OldMode: 0o100644},
					{Path: "/workspace/old", Change: "removed", Type: "dir"},
				}})
		default:
			f.fail(w, 404, "no route %s %s", r.Method, r.URL.Path)
		}
		return true
	}
	if len(parts) != 3 || parts[0] != "sandboxes" {
		return false
	}
	id := parts[1]
	sb, ok := f.sandboxes[id]
	if !ok {
		return false // the sandbox fake answers 404
	}
	switch r.Method + " " + parts[2] {
	case "POST snapshots":
		var in client.NewSnapshot
		_ = json.Unmarshal(body, &in)
		s := f.newSnap(id, "named", in.Name, 0)
		s.Labels = in.Labels
		f.snaps[s.SnapshotID] = s
		reply(w, 201, s)
	case "POST turns":
		reply(w, 201, f.turn(id))
	case "POST exec":
		var req client.ExecRequest
		_ = json.Unmarshal(body, &req)
		if !req.Turn {
			return false
		}
		code := int32(0)
		snap := f.turn(id).SnapshotID
		if r.URL.Query().Get("wait") == "true" {
			reply(w, 200, client.ExecResult{Stdout: "out", SnapshotID: snap})
			return true
		}
		enc := json.NewEncoder(w)
		_ = enc.Encode(client.ExecEvent{Type: "stdout", Data: []byte("out")})
		_ = enc.Encode(client.ExecEvent{Type: "exit", ExitCode: &code, SnapshotID: snap})
	case "POST rollback":
		var in client.RollbackRequest
		_ = json.Unmarshal(body, &in)
		if _, ok := f.snaps[in.SnapshotID]; !ok {
			f.fail(w, 404, "snapshot %s not found", in.SnapshotID)
			return true
		}
		if !in.Force && sb.Metadata["busy"] == "yes" {
			f.fail(w, 409, "sandbox %s is running commands: pass force to kill them", id)
			return true
		}
		sb.Head = in.SnapshotID
		f.sandboxes[id] = sb
		reply(w, 200, client.RollbackResult{Sandbox: sb, SnapshotID: in.SnapshotID, ProcessesRestarted: true})
	case "POST fork":
		var in client.ForkRequest
		_ = json.Unmarshal(body, &in)
		var out []client.ForkResult
		for i := range in.Count {
			if i == 2 {
				out = append(out, client.ForkResult{Error: &client.Error{Code: 429, Message: "sandbox limit reached"}})
				continue
			}
			fid := fmt.Sprintf("sb%d", len(f.sandboxes)+1)
			f.sandboxes[fid] = client.SandboxDetail{Sandbox: client.Sandbox{SandboxID: fid}, State: "running",
				Metadata: in.Metadata, ForkedFrom: id}
			out = append(out, client.ForkResult{Sandbox: &client.Sandbox{SandboxID: fid}})
		}
		reply(w, 201, out)
	case "POST promote":
		if sb.ForkedFrom == "" {
			f.fail(w, 409, "sandbox %s is not a fork", id)
			return true
		}
		prev := f.newSnap(sb.ForkedFrom, "implicit", "", 0)
		f.snaps[prev.SnapshotID] = prev
		reply(w, 200, client.RollbackResult{Sandbox: f.sandboxes[sb.ForkedFrom], SnapshotID: "x", PreviousSnapshotID: prev.SnapshotID,
			ProcessesRestarted: true})
	case "GET lineage":
		reply(w, 200, f.lineage)
	default:
		return false
	}
	return true
}

func (f *snapFake) newSnap(sandbox, kind, name string, turn int) client.Snapshot {
	id := fmt.Sprintf("sn%d", len(f.snaps)+1)
	return client.Snapshot{SnapshotID: id, Names: []string{id}, SandboxID: sandbox, Name: name, Kind: kind, Turn: turn,
		State: "ready", ExclusiveBytes: int64(len(f.snaps)) * 1536, ReferencedBytes: 1 << 20,
		CreatedAt: time.Date(2026, 1, 2, 3, 4, len(f.snaps), 0, time.UTC)}
}

func (f *snapFake) turn(id string) client.Snapshot {
	f.turns[id]++
	s := f.newSnap(id, "turn", "turn-"+strconv.Itoa(f.turns[id]), f.turns[id])
	f.snaps[s.SnapshotID] = s
	return s
}

// GET /snapshots is answered here, for its paging and filters.
func (f *snapFake) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	ids := make([]string, 0, len(f.snaps))
	for id, s := range f.snaps {
		states := q["state"]
		if (q.Get("sandboxID") == "" || s.SandboxID == q.Get("sandboxID")) && (q.Get("name") == "" || s.Name == q.Get("name")) &&
			(len(states) == 0 || strings.Contains(strings.Join(states, ","), s.State)) {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	start, _ := strconv.Atoi(q.Get("nextToken"))
	end := min(start+f.pageSize, len(ids))
	page := []client.Snapshot{}
	for _, id := range ids[start:end] {
		page = append(page, f.snaps[id])
	}
	if end < len(ids) {
		w.Header().Set("X-Next-Token", strconv.Itoa(end))
	}
	reply(w, 200, page)
}

func TestCLISnapshots(t *testing.T) {
	f, env := newSnapFake(t)
	cli(t, env, "", "sandbox", "create").must(t, 0)

	r := cli(t, env, "", "snapshot", "create", "sb1", "--name", "before", "--label", "step=3").must(t, 0)
	if r.stdout != "sn1\n" {
		t.Fatalf("create printed %q", r.stdout)
	}
	var in client.NewSnapshot
	if err := json.Unmarshal(f.lastBody, &in); err != nil || in.Name != "before" || in.Labels["step"] != "3" {
		t.Fatalf("create sent %s (%v)", f.lastBody, err)
	}
	r = cli(t, env, "", "snapshot", "create", "sb1", "--label", "bad").must(t, 1)
	if !strings.Contains(r.stderr, `--label "bad": want KEY=VALUE`) {
		t.Fatalf("stderr %q", r.stderr)
	}
	r = cli(t, env, "", "turn", "sb1").must(t, 0)
	if r.stdout != "sn2\n" || r.stderr != "turn-1\n" {
		t.Fatalf("turn: stdout %q stderr %q", r.stdout, r.stderr)
	}
	r = cli(t, env, "", "--json", "turn", "sb1").must(t, 0)
	var s client.Snapshot
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil || s.Name != "turn-2" || s.Kind != "turn" {
		t.Fatalf("turn --json printed %q (%v)", r.stdout, err)
	}
	cli(t, env, "", "turn", "nope").must(t, 1)

	// exec --turn: the id on stderr after the output, the exit code unchanged.
	r = cli(t, env, "", "exec", "--turn", "sb1", "--", "ls").must(t, 0)
	if r.stdout != "out" || r.stderr != "turn snapshot: sn4\n" {
		t.Fatalf("exec --turn: stdout %q stderr %q", r.stdout, r.stderr)
	}
	if !strings.Contains(string(f.lastBody), `"turn":true`) {
		t.Fatalf("exec --turn sent %s", f.lastBody)
	}
	r = cli(t, env, "", "exec", "--json", "--turn", "sb1", "ls").must(t, 0)
	if !strings.Contains(r.stdout, `"snapshotID": "sn5"`) || r.stderr != "turn snapshot: sn5\n" {
		t.Fatalf("exec --json --turn: stdout %q stderr %q", r.stdout, r.stderr)
	}
	cli(t, env, "", "exec", "sb1", "exit3").must(t, 3) // without --turn: the old path

	f.mu.Lock()
	f.snaps["sn3"] = func() client.Snapshot { s := f.snaps["sn3"]; s.State = "deleted"; return s }()
	f.mu.Unlock()
	r = cli(t, env, "", "snapshot", "ls", "--sandbox", "sb1").must(t, 0)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 5 || !strings.HasPrefix(lines[0], "ID") || !strings.Contains(lines[0], "SIZE") ||
		strings.Contains(lines[0], "STATE") || !strings.Contains(r.stdout, "turn-3") || strings.Contains(r.stdout, "sn3") {
		t.Fatalf("ls printed:\n%s", r.stdout)
	}
	if !strings.HasPrefix(lines[1], "sn1") || !strings.Contains(lines[1], "before") || !strings.Contains(lines[1], "named") ||
		!strings.Contains(lines[2], "1.5KiB") {
		t.Fatalf("ls rows:\n%s", r.stdout)
	}
	if f.lastQuery != "nextToken=2&sandboxID=sb1&state=ready&state=archived" {
		t.Fatalf("ls query %q", f.lastQuery)
	}
	// An archived turn is usable: listed, with its state, and the sandbox
	// may be given as the argument.
	f.mu.Lock()
	f.snaps["sn2"] = func() client.Snapshot { s := f.snaps["sn2"]; s.State = "archived"; return s }()
	f.mu.Unlock()
	r = cli(t, env, "", "snapshot", "ls", "sb1").must(t, 0)
	lines = strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 5 || !strings.Contains(lines[0], "STATE") || !strings.HasPrefix(lines[2], "sn2") ||
		!strings.HasSuffix(lines[2], "archived") || !strings.HasSuffix(lines[1], "ready") {
		t.Fatalf("ls with an archived turn printed:\n%s", r.stdout)
	}
	if !strings.Contains(f.lastQuery, "sandboxID=sb1") {
		t.Fatalf("ls SANDBOX query %q", f.lastQuery)
	}
	r = cli(t, env, "", "snapshot", "ls", "sb1", "--sandbox", "sb2").must(t, 1)
	if !strings.Contains(r.stderr, "two sandboxes given") {
		t.Fatalf("ls with two sandboxes: %q", r.stderr)
	}
	r = cli(t, env, "", "snapshot", "ls", "--all").must(t, 0)
	if !strings.Contains(r.stdout, "STATE") || !strings.Contains(r.stdout, "deleted") || len(strings.Split(strings.TrimSpace(r.stdout), "\n")) != 6 {
		t.Fatalf("ls --all printed:\n%s", r.stdout)
	}
	r = cli(t, env, "", "--json", "snapshot", "ls", "--name", "nothing").must(t, 0)
	if strings.TrimSpace(r.stdout) != "[]" {
		t.Fatalf("ls --json of nothing printed %q", r.stdout)
	}

	r = cli(t, env, "", "snapshot", "get", "sn1").must(t, 0)
	if !strings.Contains(r.stdout, "step=3") || !strings.Contains(r.stdout, "0B exclusive, 1MiB referenced") {
		t.Fatalf("get printed:\n%s", r.stdout)
	}
	// A snapshot may be named instead of given by id; turn names are
	// looked up among the sandbox's own when the command names one.
	r = cli(t, env, "", "snapshot", "get", "before").must(t, 0)
	if !strings.Contains(r.stdout, "sn1") {
		t.Fatalf("get by name printed:\n%s", r.stdout)
	}
	cli(t, env, "", "rollback", "sb1", "turn-1").must(t, 0)
	if !strings.Contains(string(f.lastBody), `"snapshotID":"sn2"`) {
		t.Fatalf("rollback by turn name sent %s", f.lastBody)
	}
	r = cli(t, env, "", "snapshot", "rm", "sn1", "nope").must(t, 1)
	if r.stdout != "sn1\n" || r.stderr != "error: no snapshot has the id or name \"nope\" (warren snapshot ls lists them)\n" {
		t.Fatalf("rm: stdout %q stderr %q", r.stdout, r.stderr)
	}
}

func TestCLIRollbackForkPromote(t *testing.T) {
	f, env := newSnapFake(t)
	cli(t, env, "", "sandbox", "create", "--meta", "busy=yes").must(t, 0)
	cli(t, env, "", "turn", "sb1").must(t, 0)

	r := cli(t, env, "", "rollback", "sb1", "sn1").must(t, 1)
	if !strings.Contains(r.stderr, "pass force") {
		t.Fatalf("rollback of a busy sandbox: %q", r.stderr)
	}
	r = cli(t, env, "", "rollback", "--force", "sb1", "sn1").must(t, 0)
	if r.stdout != "rolled back sb1 to sn1 (processes restarted)\n" {
		t.Fatalf("rollback printed %q", r.stdout)
	}
	cli(t, env, "", "rollback", "sb1").must(t, 1)
	cli(t, env, "", "rollback", "sb1", "nope").must(t, 1)

	r = cli(t, env, "", "fork", "sb1", "sn1", "-n", "2", "--meta", "try=a", "--timeout", "0").must(t, 0)
	if r.stdout != "sb2\nsb3\n" || r.stderr != "" {
		t.Fatalf("fork: stdout %q stderr %q", r.stdout, r.stderr)
	}
	var in client.ForkRequest
	if err := json.Unmarshal(f.lastBody, &in); err != nil || in.SnapshotID != "sn1" || in.Count != 2 ||
		in.Metadata["try"] != "a" || in.Timeout == nil || *in.Timeout != 0 {
		t.Fatalf("fork sent %s (%v)", f.lastBody, err)
	}
	// The third fork fails: the others are printed, the failure goes to
	// stderr, and the exit status says something failed.
	r = cli(t, env, "", "fork", "sb1", "--count", "3").must(t, 1)
	if r.stdout != "sb4\nsb5\n" || r.stderr != "error: fork 3: sandbox limit reached\n" {
		t.Fatalf("partial fork: stdout %q stderr %q", r.stdout, r.stderr)
	}
	if strings.Contains(string(f.lastBody), "snapshotID") || strings.Contains(string(f.lastBody), "timeout") {
		t.Fatalf("fork of the live state sent %s", f.lastBody)
	}
	r = cli(t, env, "", "--json", "fork", "sb1").must(t, 0)
	var res []client.ForkResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || len(res) != 1 || res[0].Sandbox.SandboxID != "sb6" {
		t.Fatalf("fork --json printed %q (%v)", r.stdout, err)
	}
	cli(t, env, "", "fork", "sb1", "-n", "0").must(t, 1)

	r = cli(t, env, "", "promote", "sb2").must(t, 0)
	if r.stdout != "promoted sb2 into sb1 (previous state kept as snapshot sn2)\n" {
		t.Fatalf("promote printed %q", r.stdout)
	}
	r = cli(t, env, "", "promote", "sb1").must(t, 1)
	if r.stderr != "error: sandbox sb1 is not a fork\n" {
		t.Fatalf("promote of a non-fork: %q", r.stderr)
	}
}

func TestCLIDiff(t *testing.T) {
	f, env := newSnapFake(t)
	cli(t, env, "", "sandbox", "create").must(t, 0)
	cli(t, env, "", "turn", "sb1").must(t, 0)

	r := cli(t, env, "", "diff", "sn1").must(t, 0)
	want := `A  /workspace/new.txt (1.2KiB)
M  /workspace/a.txt (10B → 12B)
M  /workspace/run.sh (mode 0644 → 0755)
D  /workspace/old/
1 added, 2 modified, 1 removed (sn1 → live in 1.5ms)
`
	if r.stdout != want {
		t.Fatalf("diff printed:\n%s\nwant:\n%s", r.stdout, want)
	}
	if f.lastQuery != "to=live" {
		t.Fatalf("diff query %q", f.lastQuery)
	}
	cli(t, env, "", "turn", "sb1").must(t, 0)
	r = cli(t, env, "", "diff", "--content", "sn1", "sn2").must(t, 0)
	if f.lastQuery != "content=true&to=sn2" || !strings.Contains(r.stdout, "M  /workspace/a.txt (10B → 12B)\n--- a/workspace/a.txt\n") ||
		!strings.Contains(r.stdout, "+hello!!\nM  /workspace/run.sh") {
		t.Fatalf("diff --content (query %q) printed:\n%s", f.lastQuery, r.stdout)
	}
	r = cli(t, env, "", "--json", "diff", "sn1").must(t, 0)
	var d client.Diff
	if err := json.Unmarshal([]byte(r.stdout), &d); err != nil || len(d.Changes) != 4 || d.To != "live" {
		t.Fatalf("diff --json printed %q (%v)", r.stdout, err)
	}
	cli(t, env, "", "diff", "nope").must(t, 1)
}

func TestDiffLine(t *testing.T) {
	tests := []struct {
		e    client.DiffEntry
		want string
	}{
		{client.DiffEntry{Path: "/a", Change: "added", Type: "file", Size: 10}, "A  /a (10B)"},
		{client.DiffEntry{Path: "/d", Change: "added", Type: "dir"}, "A  /d/"},
		{client.DiffEntry{Path: "/l", Change: "added", Type: "symlink", Size: 4}, "A  /l (symlink)"},
		{client.DiffEntry{Path: "/f", Change: "modified", Type: "file", Size: 3, OldSize: 3}, "M  /f (3B)"},
		{client.DiffEntry{Path: "/f", Change: "modified", Type: "file", Size: 2048, OldSize: 3, Mode: 0o600, OldMode: 0o644},
			"M  /f (3B → 2KiB, mode 0644 → 0600)"},
		{client.DiffEntry{Path: "/d", Change: "modified", Type: "dir", Mode: 0o700, OldMode: 0o755}, "M  /d/ (mode 0755 → 0700)"},
		{client.DiffEntry{Path: "/x", Change: "removed", Type: "file", OldSize: 9}, "D  /x"},
		{client.DiffEntry{Path: "/x", Change: "renamed"}, "?  /x"},
		// A name that would forge a line, or reach the terminal, is quoted.
		{client.DiffEntry{Path: "/w/a\nD  /etc/passwd", Change: "added", Type: "file", Size: 1}, `A  "/w/a\nD  /etc/passwd" (1B)`},
		{client.DiffEntry{Path: "/w/\x1b]0;x\a", Change: "removed", Type: "file"}, `D  "/w/\x1b]0;x\a"`},
	}
	for _, tt := range tests {
		if got := diffLine(tt.e); got != tt.want {
			t.Errorf("diffLine(%+v) = %q, want %q", tt.e, got, tt.want)
		}
	}
}

func TestCLITreeHasSnapshotCommands(t *testing.T) {
	root := newRootCmd(&app{getenv: func(string) string { return "" }})
	for _, path := range [][]string{{"snapshot", "create"}, {"snapshot", "ls"}, {"snapshot", "get"}, {"snapshot", "rm"},
		{"turn"}, {"rollback"}, {"fork"}, {"promote"}, {"diff"}, {"lineage"}} {
		cmd, _, err := root.Find(path)
		if err != nil || cmd.Name() != path[len(path)-1] {
			t.Errorf("command %v not registered (%v)", path, err)
		}
	}
}
