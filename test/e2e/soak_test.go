package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warrenhq/warren/client"
)

// soakScale: the short soak runs in `make test`; WARREN_TORTURE=long
// (`make torture`) is the 20 clients for 10 minutes, and
// WARREN_SOAK=1h makes it an hour.
func soakScale() (clients int, d time.Duration) {
	clients, d = 6, 40*time.Second
	if os.Getenv("WARREN_TORTURE") == "long" {
		clients, d = 20, 10*time.Minute
	}
	if v, err := time.ParseDuration(os.Getenv("WARREN_SOAK")); err == nil && v > 0 {
		d = v
	}
	return clients, d
}

// soakAgent is one agent-like client: a sandbox per session, and in it
// turns of file writes, commands, tool calls and turn snapshots, now and
// then a rollback; the session ends by deleting its sandbox. Every error
// is unexpected: the daemon is not killed here.
func soakAgent(ctx context.Context, c *client.Client, n int, errs chan<- error, ops *int64, mu *sync.Mutex) {
	fail := func(what string, err error) bool {
		if err == nil || ctx.Err() != nil {
			return false
		}
		errs <- fmt.Errorf("client %d: %s: %w", n, what, err)
		return true
	}
	count := func() { mu.Lock(); *ops++; mu.Unlock() }
	for session := 0; ctx.Err() == nil; session++ {
		sb, err := c.CreateSandbox(ctx, client.NewSandbox{TemplateID: "bb", Timeout: ptr(int64(0))})
		if fail("create", err) {
			return
		}
		if err != nil {
			return
		}
		count()
		var turns []string
		for turn := 0; turn < 8 && ctx.Err() == nil; turn++ {
			path := fmt.Sprintf("/workspace/f%d.txt", turn)
			body := strings.Repeat(fmt.Sprintf("session %d turn %d\n", session, turn), 50)
			if _, err := c.WriteFile(ctx, sb.SandboxID, path, strings.NewReader(body), 0o644, ""); fail("write", err) {
				return
			}
			res, err := c.ExecWait(ctx, sb.SandboxID, sh("wc -l < "+path+"; ls /workspace | wc -l"))
			if fail("exec", err) {
				return
			}
			if err == nil && !strings.HasPrefix(res.Stdout, "50\n") {
				errs <- fmt.Errorf("client %d: exec saw %q", n, res.Stdout)
				return
			}
			params, _ := json.Marshal(map[string]any{"path": path, "oldString": fmt.Sprintf("turn %d\n", turn), "newString": "edited\n", "replaceAll": true})
			if tr, err := c.CallTool(ctx, sb.SandboxID, "edit", client.ToolCall{Params: params}, nil); fail("edit tool", err) {
				return
			} else if err == nil && tr.IsError {
				errs <- fmt.Errorf("client %d: edit tool: %s", n, tr.Content)
				return
			}
			rc, err := c.ReadFile(ctx, sb.SandboxID, path)
			if fail("read", err) {
				return
			}
			if err == nil {
				data, _ := io.ReadAll(rc)
				rc.Close()
				if !strings.Contains(string(data), "edited") {
					errs <- fmt.Errorf("client %d: read after edit: %.60q", n, data)
					return
				}
			}
			snap, err := c.Turn(ctx, sb.SandboxID)
			if fail("turn", err) {
				return
			}
			turns = append(turns, snap.SnapshotID)
			if turn == 5 {
				if _, err := c.Rollback(ctx, sb.SandboxID, client.RollbackRequest{SnapshotID: turns[2]}); fail("rollback", err) {
					return
				}
			}
			count()
		}
		if err := c.DeleteSandbox(context.WithoutCancel(ctx), sb.SandboxID); err != nil {
			errs <- fmt.Errorf("client %d: delete: %w", n, err)
			return
		}
	}
}

// TestTortureSoak runs agent-like clients against one daemon for a while:
// no error at all, and the daemon's open files back where they started
// once every sandbox is gone. Its memory (RSS) and open files are sampled
// throughout and their slopes printed; the garbage collector makes RSS too
// noisy to assert on.
func TestTortureSoak(t *testing.T) {
	clients, dur := soakScale()
	// The profiler's memory statistics split the daemon's RSS into what
	// Go's runtime holds and the rest (SQLite's page caches, which the
	// pure-Go driver allocates outside the Go heap; the binary's pages).
	pprofAddr := freePort(t)
	d := busyboxDaemon(t, "--default-timeout", "0", "--pprof", pprofAddr)
	c := d.client()
	pid := d.cmd.Process.Pid
	// Warm up: the first sandbox opens the pool, the database, the logs.
	if _, _, err := c.ListSandboxes(ctxT(t, time.Minute), client.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	fdsBefore := openFiles(pid)
	goroutinesBefore := goroutines(pprofAddr)

	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()
	errs := make(chan error, 1000)
	var ops int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			soakAgent(ctx, c, i, errs, &ops, &mu)
		}(i)
	}
	type sample struct {
		at                                time.Duration
		rss, anon, fds, heap, goRes, rest float64
		idle, stacks, goroutines          float64
	}
	var samples []sample
	start := time.Now()
	tick := time.NewTicker(2 * time.Second)
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-tick.C:
			s := sample{at: time.Since(start), rss: float64(rssKB(pid)), anon: float64(statusKB(pid, "RssAnon:")), fds: float64(openFiles(pid))}
			if m, err := goMemStats(pprofAddr); err == nil {
				s.heap = float64(m["HeapInuse"]) / 1024
				s.goRes = float64(m["Sys"]-m["HeapReleased"]) / 1024
				s.rest = s.rss - s.goRes
				s.idle = float64(m["HeapIdle"]-m["HeapReleased"]) / 1024
				s.stacks = float64(m["Stack"]) / 1024
			}
			s.goroutines = float64(goroutines(pprofAddr))
			samples = append(samples, s)
		}
	}
	tick.Stop()
	wg.Wait()
	close(errs)
	// A client that stopped on an error left its sandbox: delete it too.
	cleanup := ctxT(t, 2*time.Minute)
	for _, sb := range listAll(t, cleanup, c) {
		if err := c.DeleteSandbox(cleanup, sb.SandboxID); err != nil && client.StatusCode(err) != 404 {
			t.Errorf("delete %s: %v", sb.SandboxID, err)
		}
	}
	n := 0
	for err := range errs {
		if n < 20 {
			t.Errorf("unexpected error: %v", err)
		}
		n++
	}
	var xs, rss, anon, fds, heap, goRes, rest, idle, stacks, grs []float64
	for _, s := range samples {
		xs = append(xs, s.at.Minutes())
		rss = append(rss, s.rss)
		anon = append(anon, s.anon)
		fds = append(fds, s.fds)
		heap = append(heap, s.heap)
		goRes = append(goRes, s.goRes)
		rest = append(rest, s.rest)
		idle = append(idle, s.idle)
		stacks = append(stacks, s.stacks)
		grs = append(grs, s.goroutines)
	}
	if len(samples) > 0 {
		// RSS also counts the binary's pages as code paths are first run,
		// and the Go heap growing to its working size: the second half's
		// slope of anonymous memory is the one a leak would show in.
		h := len(samples) / 2
		t.Logf("soak: %d clients for %s: %d turns and sessions, %d errors; daemon RSS %.0f → %.0f KiB (slope %.0f KiB/min; anonymous %.0f → %.0f KiB, second half's slope %.0f KiB/min), open files %.0f → %.0f (slope %.1f/min)",
			clients, dur, ops, n, rss[0], rss[len(rss)-1], slope(xs, rss), anon[0], anon[len(anon)-1], slope(xs[h:], anon[h:]),
			fds[0], fds[len(fds)-1], slope(xs, fds))
		q := len(samples) * 3 / 4
		t.Logf("soak memory, KiB (first → last; slope over the whole run / its last quarter, KiB/min): Go heap in use %.0f → %.0f (%.0f / %.0f); Go's runtime, resident at most %.0f → %.0f (%.0f / %.0f); the rest of RSS (SQLite's caches outside the Go heap, the binary) %.0f → %.0f (%.0f / %.0f)",
			heap[0], heap[len(heap)-1], slope(xs, heap), slope(xs[q:], heap[q:]),
			goRes[0], goRes[len(goRes)-1], slope(xs, goRes), slope(xs[q:], goRes[q:]),
			rest[0], rest[len(rest)-1], slope(xs, rest), slope(xs[q:], rest[q:]))
		t.Logf("soak runtime: heap idle but not yet returned %.0f → %.0f KiB (last quarter %.0f KiB/min); goroutine stacks %.0f → %.0f KiB; goroutines %.0f → %.0f (last quarter %.1f/min)",
			idle[0], idle[len(idle)-1], slope(xs[q:], idle[q:]), stacks[0], stacks[len(stacks)-1],
			grs[0], grs[len(grs)-1], slope(xs[q:], grs[q:]))
	}
	// Every sandbox is gone: the daemon holds no file of one any more
	// (logs, volumes, sockets of the data directory). Handles that come and
	// go by themselves are not counted: keep-alive sockets of the HTTP
	// clients, more pooled database connections, and pidfds of exited
	// children, which Go closes when their os.Process is collected.
	deadline := time.Now().Add(15 * time.Second)
	for {
		left := sandboxFiles(pid, d.dataDir)
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("after every sandbox was deleted the daemon still holds:\n%s", strings.Join(left, "\n"))
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("open files: %d before the soak, %d after (%s)", fdsBefore, openFiles(pid), strings.Join(fdTargets(pid), ", "))
	t.Logf("goroutines: %d before the soak, %d after every sandbox is gone", goroutinesBefore, goroutines(pprofAddr))
}

// sandboxFiles lists a process's open files inside dataDir other than the
// database's.
func sandboxFiles(pid int, dataDir string) []string {
	var out []string
	for _, target := range fdTargets(pid) {
		if strings.HasPrefix(target, dataDir+"/") && !strings.HasPrefix(filepath.Base(target), "warren.db") {
			out = append(out, target)
		}
	}
	return out
}

// slope is the least-squares slope of ys over xs.
func slope(xs, ys []float64) float64 {
	n := float64(len(xs))
	if n < 2 {
		return 0
	}
	var sx, sy, sxy, sxx float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
		sxy += xs[i] * ys[i]
		sxx += xs[i] * xs[i]
	}
	den := n*sxx - sx*sx
	if den == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / den
}

func openFiles(pid int) int {
	entries, _ := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "fd"))
	return len(entries)
}

func rssKB(pid int) int { return statusKB(pid, "VmRSS:") }

// statusKB reads one of the kB fields of /proc/PID/status ("VmRSS:",
// "RssAnon:", …), 0 when it cannot.
func statusKB(pid int, field string) int {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, field) {
			f := strings.Fields(l)
			if len(f) >= 2 {
				v, _ := strconv.Atoi(f[1])
				return v
			}
		}
	}
	return 0
}

// fdTargets lists what a process's open files are.
func fdTargets(pid int) []string {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	entries, _ := os.ReadDir(dir)
	var out []string
	for _, e := range entries {
		if target, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil {
			out = append(out, target)
		}
	}
	return out
}

// goMemStats reads the daemon's runtime.MemStats from the profiler's heap
// page (its "# Name = value" lines), in bytes.
func goMemStats(addr string) (map[string]uint64, error) {
	resp, err := http.Get("http://" + addr + "/debug/pprof/heap?debug=1")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]uint64{}
	for _, l := range strings.Split(string(body), "\n") {
		name, val, ok := strings.Cut(strings.TrimPrefix(l, "# "), " = ")
		if !ok || !strings.HasPrefix(l, "# ") {
			continue
		}
		// "# Stack = inuse / sys" holds two numbers: the first is in use.
		val, _, _ = strings.Cut(val, " / ")
		if v, err := strconv.ParseUint(val, 10, 64); err == nil {
			out[name] = v
		}
	}
	if _, ok := out["Sys"]; !ok {
		return nil, fmt.Errorf("no memory statistics at %s", addr)
	}
	return out, nil
}

// goroutines reads the daemon's goroutine count from the profiler ("goroutine
// profile: total N"), 0 when it cannot.
func goroutines(addr string) int {
	resp, err := http.Get("http://" + addr + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "goroutine profile: total")))
	return n
}
