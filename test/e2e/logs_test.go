package e2e

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/warrenhq/warren/client"
)

// TestSandboxLogs drives a sandbox's log end to end: foreground and
// background output and lifecycle steps in one ordered log, cursors,
// filters, E2B's two shapes, `warren logs` and its follow mode, a daemon
// kill -9 (nothing lost, nothing repeated), bad input, and removal.
func TestSandboxLogs(t *testing.T) {
	t.Parallel()
	d, ctx, id := busyboxSandbox(t, 3*time.Minute)
	c := d.client()

	if _, err := c.Commands.Exec(ctx, id, client.ExecRequest{Command: "echo hello; echo oops >&2"}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Processes.Start(ctx, id, client.StartProcessRequest{Tag: "ticker", ExecRequest: client.ExecRequest{
		Command: `for i in 1 2 3; do echo tick $i; done; printf 'no newline'; exit 2`,
	}}); err != nil {
		t.Fatal(err)
	}
	waitLog(t, c, id, "exited: code 2")
	if err := c.Lifecycle.Pause(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Lifecycle.Resume(ctx, id); err != nil {
		t.Fatal(err)
	}

	page, err := c.Sandboxes.Logs(ctx, id, client.LogsQuery{})
	if err != nil {
		t.Fatal(err)
	}
	msgs := logMessages(page.LogEntries)
	// stdout and stderr are separate pipes: their lines may come either way.
	inOrder(t, msgs, "started: echo hello; echo oops >&2", "oops", "exited: code 0")
	inOrder(t, msgs, "created (", "started: echo hello; echo oops >&2", "hello", "exited: code 0",
		"tick 1", "tick 2", "tick 3", "no newline", "exited: code 2", "paused (running → paused, api)", "resumed (paused → running, api)")
	for i, e := range page.LogEntries {
		if e.Fields["seq"] != strconv.Itoa(i+1) {
			t.Fatalf("entry %d: seq %q", i, e.Fields["seq"])
		}
		if e.Message == "oops" && (e.Level != "error" || e.Fields["source"] != "stderr") {
			t.Fatalf("stderr line: %+v", e)
		}
		if e.Message == "tick 2" && (e.Fields["tag"] != "ticker" || e.Fields["pid"] == "" || e.Fields["source"] != "stdout") {
			t.Fatalf("background line: %+v", e)
		}
	}
	if len(page.Logs) != len(page.LogEntries) || page.Logs[1].Line != page.LogEntries[1].Message {
		t.Fatalf("E2B's line shape does not match the entries: %d vs %d", len(page.Logs), len(page.LogEntries))
	}
	last := page.NextCursor
	if last != int64(len(page.LogEntries)) {
		t.Fatalf("nextCursor %d after %d entries", last, len(page.LogEntries))
	}

	// Filters, and paging backward.
	warn, err := c.Sandboxes.Logs(ctx, id, client.LogsQuery{Level: "warn"})
	if err != nil {
		t.Fatal(err)
	}
	inOrder(t, logMessages(warn.LogEntries), "oops", "exited: code 2")
	for _, e := range warn.LogEntries {
		if e.Level == "info" {
			t.Fatalf("level filter let through %+v", e)
		}
	}
	tail, err := c.Sandboxes.Logs(ctx, id, client.LogsQuery{Backward: true, Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if got := logMessages(tail.LogEntries); len(got) != 2 || !strings.HasPrefix(got[0], "resumed") {
		t.Fatalf("the newest two, newest first: %q", got)
	}

	// The CLI, whole and tail.
	out := d.mustCLI("logs", id)
	if !strings.Contains(out, "stdout[") || !strings.Contains(out, " tick 3\n") || !strings.Contains(out, "lifecycle resumed") {
		t.Fatalf("warren logs:\n%s", out)
	}
	if out := d.mustCLI("logs", "-n", "1", id); strings.Count(out, "\n") != 1 || !strings.Contains(out, "resumed") {
		t.Fatalf("warren logs -n 1:\n%s", out)
	}

	// Follow: the CLI prints a line printed after it started.
	follow := exec.Command(filepath.Join(d.bin, "warren"), "logs", "-f", "-n", "0", "--json", id)
	follow.Env = append(os.Environ(), "WARREN_URL=http://"+d.addr, "WARREN_API_KEY="+d.key)
	stdout, err := follow.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { follow.Process.Kill(); follow.Wait() })
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	if _, err := c.Commands.Exec(ctx, id, client.ExecRequest{Command: "echo later"}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	sawLater := false
	deadline := time.After(30 * time.Second)
	for !sawLater {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("warren logs -f ended")
			}
			var e client.LogEntry
			if err := json.Unmarshal([]byte(l), &e); err != nil {
				t.Fatalf("warren logs --json printed %q: %v", l, err)
			}
			sawLater = e.Message == "later"
		case <-deadline:
			t.Fatal("warren logs -f did not print a new line within 30 s")
		}
	}
	follow.Process.Signal(syscall.SIGINT)
	if err := follow.Wait(); err != nil {
		t.Fatalf("warren logs -f after SIGINT: %v", err)
	}

	// A waiting read returns as soon as an entry comes.
	waitLog(t, c, id, "later")
	end, err := c.Sandboxes.Logs(ctx, id, client.LogsQuery{Backward: true, Limit: 1})
	if err != nil || len(end.LogEntries) != 1 {
		t.Fatalf("the newest entry: %+v %v", end, err)
	}
	cur, _ := strconv.ParseInt(end.LogEntries[0].Fields["seq"], 10, 64)
	got := make(chan client.SandboxLogs, 1)
	go func() {
		p, _ := c.Sandboxes.Logs(ctx, id, client.LogsQuery{Cursor: cur, Wait: 30 * time.Second})
		got <- p
	}()
	time.Sleep(200 * time.Millisecond)
	if _, err := c.Processes.Start(ctx, id, client.StartProcessRequest{ExecRequest: client.ExecRequest{Command: "echo waited-for"}}); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-got:
		if len(p.LogEntries) == 0 || p.LogEntries[0].Fields["seq"] != strconv.FormatInt(cur+1, 10) {
			t.Fatalf("waiting read: %+v", p)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a waiting read did not return when an entry came")
	}

	// kill -9 the daemon while a process prints; after the restart the log
	// goes on: every line once, numbers never repeated.
	if _, err := c.Processes.Start(ctx, id, client.StartProcessRequest{Tag: "counter", ExecRequest: client.ExecRequest{
		Command: `i=0; while [ $i -lt 80 ]; do echo n$i; i=$((i+1)); sleep 0.05; done; exit 7`,
	}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	d.stop(syscall.SIGKILL)
	time.Sleep(time.Second)
	d.start()
	c = d.client()
	waitLog(t, c, id, "exited: code 7")
	all, err := c.Sandboxes.Logs(ctx, id, client.LogsQuery{})
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for i, e := range all.LogEntries {
		if e.Fields["seq"] != strconv.Itoa(i+1) {
			t.Fatalf("after the restart, entry %d has seq %q", i, e.Fields["seq"])
		}
		if e.Fields["tag"] == "counter" && e.Fields["source"] == "stdout" {
			counts[e.Message]++
		}
	}
	for i := 0; i < 80; i++ {
		if n := counts["n"+strconv.Itoa(i)]; n != 1 {
			t.Fatalf("line n%d is in the log %d times (want once across the daemon kill)", i, n)
		}
	}
	inOrder(t, logMessages(all.LogEntries), "n0", "reattached (restart)", "n79", "exited: code 7")

	// E2B's v2 shape: a millisecond cursor.
	from := all.LogEntries[len(all.LogEntries)-1].Timestamp.UnixMilli()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+d.addr+"/v2/sandboxes/"+id+"/logs?cursor="+strconv.FormatInt(from, 10)+"&limit=5", nil)
	req.Header.Set("X-API-Key", d.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var v2 struct {
		Logs []client.LogEntry `json:"logs"`
	}
	err = json.NewDecoder(resp.Body).Decode(&v2)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("v2 logs: %d %+v %v", resp.StatusCode, v2, err)
	}
	// The answer is the first five entries from the cursor's millisecond
	// on, in order: lines replayed after the restart may share one
	// millisecond, so that need not reach the last entry.
	var want []string
	for _, e := range all.LogEntries {
		if e.Timestamp.UnixMilli() >= from && len(want) < 5 {
			want = append(want, e.Message)
		}
	}
	if got := logMessages(v2.Logs); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("v2 logs from cursor %d, limit 5: got %q, want %q", from, got, want)
	}
	for _, e := range v2.Logs {
		if e.Timestamp.UnixMilli() < from {
			t.Fatalf("v2 entry older than the cursor: %+v", e)
		}
	}

	// Bad input.
	for _, q := range []string{"level=loud", "cursor=-1", "cursor=x", "limit=0", "limit=100000", "direction=sideways", "wait=999999999999"} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+d.addr+"/sandboxes/"+id+"/logs?"+q, nil)
		req.Header.Set("X-API-Key", d.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Fatalf("logs?%s: %d, want 400", q, resp.StatusCode)
		}
	}
	if _, err := c.Sandboxes.Logs(ctx, "nosuchsandbox", client.LogsQuery{}); client.StatusCode(err) != 404 {
		t.Fatalf("logs of an unknown sandbox: %v", err)
	}

	// Deleting the sandbox deletes its log.
	if err := c.Sandboxes.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(d.dataDir, "sandbox-logs", id)); !os.IsNotExist(err) {
		t.Fatalf("the log outlived its sandbox: %v", err)
	}
}

// waitLog waits until the sandbox's log has an entry with message msg and
// returns that entry's cursor.
func waitLog(t *testing.T, c *client.Client, id, msg string) int64 {
	t.Helper()
	ctx := ctxT(t, 30*time.Second)
	var cur int64
	for {
		p, err := c.Sandboxes.Logs(ctx, id, client.LogsQuery{Cursor: cur, Wait: 5 * time.Second})
		if err != nil {
			t.Fatalf("waiting for %q in the log: %v", msg, err)
		}
		for _, e := range p.LogEntries {
			if e.Message == msg {
				n, _ := strconv.ParseInt(e.Fields["seq"], 10, 64)
				return n
			}
		}
		cur = p.NextCursor
	}
}

func logMessages(es []client.LogEntry) []string {
	out := make([]string, 0, len(es))
	for _, e := range es {
		out = append(out, e.Message)
	}
	return out
}

// inOrder checks that msgs holds entries starting with each of want, in
// that order.
func inOrder(t *testing.T, msgs []string, want ...string) {
	t.Helper()
	i := 0
	for _, m := range msgs {
		if i < len(want) && strings.HasPrefix(m, want[i]) {
			i++
		}
	}
	if i < len(want) {
		t.Fatalf("log is missing %q (in order) among:\n%s", want[i], strings.Join(msgs, "\n"))
	}
}
