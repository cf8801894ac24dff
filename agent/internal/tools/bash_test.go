package tools

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/warrenhq/warren/agent/internal/agenttest"
)

func TestBashBasics(t *testing.T) {
	e := newEnv(t)
	r := e.run(t, "bash", map[string]any{"command": "echo out; echo err >&2; pwd"})
	out := mustOK(t, r)
	if out != "out\nerr\n"+e.home || r.ExitCode == nil || *r.ExitCode != 0 {
		t.Fatalf("got %q exit %v", out, r.ExitCode)
	}

	r = e.run(t, "bash", map[string]any{"command": "echo failing; exit 3"})
	mustFail(t, r, "failing\n[exit code 3]")
	if *r.ExitCode != 3 {
		t.Fatalf("exit code %d", *r.ExitCode)
	}

	if err := os.Mkdir(filepath.Join(e.home, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	r = e.run(t, "bash", map[string]any{"command": `echo "$GREETING from $(pwd) as $USER, home $HOME"`, "cwd": "sub", "env": map[string]string{"GREETING": "hi"}})
	if got := mustOK(t, r); got != "hi from "+e.home+"/sub as user, home "+e.home {
		t.Fatalf("got %q", got)
	}

	mustOK(t, e.run(t, "bash", map[string]any{"command": "cat"})) // stdin is empty: cat ends at once
	if got := mustOK(t, e.run(t, "bash", map[string]any{"command": "true"})); got != "(no output)" {
		t.Fatalf("empty output: %q", got)
	}
	mustFail(t, e.run(t, "bash", map[string]any{"command": "pwd", "cwd": "/no/such/dir"}), "working directory /no/such/dir", "no such file")
	mustFail(t, e.run(t, "bash", map[string]any{"command": "pwd", "env": map[string]string{"A=B": "x"}}), `env "A=B"`)
}

func TestBashTruncatesFromTheMiddle(t *testing.T) {
	e := newEnv(t)
	out := mustOK(t, e.run(t, "bash", map[string]any{"command": "seq 1 100000"}))
	if len(out) > maxBashOutput+300 {
		t.Fatalf("output not capped: %d bytes", len(out))
	}
	contains(t, out, "omitted from the middle of the output", "total 588895 bytes")
	if !strings.HasPrefix(out, "1\n2\n3\n") || !strings.HasSuffix(out, "\n99999\n100000") {
		t.Fatalf("head or tail lost: %q ... %q", out[:20], out[len(out)-20:])
	}
	// Every line kept is whole: the cut falls between lines.
	for _, l := range strings.Split(out, "\n") {
		if l == "" || strings.HasPrefix(l, "[...") {
			continue
		}
		if _, err := strconv.Atoi(l); err != nil {
			t.Fatalf("a cut line: %q", l)
		}
	}
	// Exactly at the limit nothing is cut.
	out = mustOK(t, e.run(t, "bash", map[string]any{"command": "head -c " + strconv.Itoa(maxBashOutput) + " /dev/zero | tr '\\0' x"}))
	if len(out) != maxBashOutput || strings.Contains(out, "omitted") {
		t.Fatalf("at the limit: %d bytes", len(out))
	}
}

func TestBashTimeoutKillsTheProcessGroup(t *testing.T) {
	e := newEnv(t)
	pidFile := filepath.Join(e.home, "child.pid")
	r := e.run(t, "bash", map[string]any{"command": "echo started; sleep 60 & echo $! > " + pidFile + "; wait", "timeoutMs": 300})
	mustFail(t, r, "started", "[timed out after 300ms")
	if r.ExitCode == nil || *r.ExitCode != 128+int(syscall.SIGKILL) {
		t.Fatalf("exit code %v", r.ExitCode)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(readFile(t, pidFile)))
	if err != nil {
		t.Fatal(err)
	}
	// The background sleep was in the group: SIGKILL reached it too. It
	// may take a moment to be scheduled and die, so wait for that (it
	// would otherwise sleep for a minute).
	deadline := time.Now().Add(20 * time.Second)
	for state := procState(pid); state != "" && state != "Z"; state = procState(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("child %d survived the timeout in state %s", pid, state)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// procState is a process's state letter, "" when it does not exist.
func procState(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return ""
	}
	return s[i+2 : i+3]
}

func TestBashBackgroundChildDoesNotHoldTheCall(t *testing.T) {
	e := newEnv(t)
	// The child inherits the output pipe and outlives the shell; the call
	// still ends, and the child keeps running.
	r := e.run(t, "bash", map[string]any{"command": "sleep 60 & echo $!"})
	pid, err := strconv.Atoi(mustOK(t, r))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	if procState(pid) == "" {
		t.Fatal("the background child was killed with the call")
	}
}

func TestBashStreamsProgress(t *testing.T) {
	e := newEnv(t)
	var mu sync.Mutex
	var chunks [][]byte
	r, err := e.runErr("bash", map[string]any{"command": "for i in 1 2 3; do echo line$i; sleep 0.05; done"}, func(b []byte) {
		mu.Lock()
		chunks = append(chunks, append([]byte(nil), b...))
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := bytes.Join(chunks, nil); string(got) != "line1\nline2\nline3\n" || mustOK(t, r) != "line1\nline2\nline3" {
		t.Fatalf("progress %q, result %q", got, r.Content)
	}
}

func TestBashRunsAsTheUser(t *testing.T) {
	agenttest.RequireRoot(t)
	e := newEnvAs(t, 4321, 4322)
	r := e.run(t, "bash", map[string]any{"command": "id -u; id -g; touch made-by-bash"})
	if got := mustOK(t, r); got != "4321\n4322" {
		t.Fatalf("ids %q", got)
	}
	fi, err := os.Stat(filepath.Join(e.home, "made-by-bash"))
	if err != nil {
		t.Fatal(err)
	}
	if uid, gid := ownerOf(fi); uid != 4321 || gid != 4322 {
		t.Fatalf("file owned by %d:%d", uid, gid)
	}
	// root is one field away.
	raw := []byte(`{"command":"id -u"}`)
	res, err := e.s.Run(t.Context(), Request{Tool: "bash", Params: raw, User: "root"}, nil)
	if err != nil || strings.TrimSpace(res.Content) != "0" {
		t.Fatalf("as root: %q %v", res.Content, err)
	}
}
