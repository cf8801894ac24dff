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
	"sync/atomic"
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
func soakAgent(ctx context.Context, c *client.Client, n int, errs chan<- error, ops *atomic.Int64) {
	fail := func(what string, err error) bool {
		if err == nil || ctx.Err() != nil {
			return false
		}
		errs <- fmt.Errorf("client %d: %s: %w", n, what, err)
		return true
	}
	count := func() { ops.Add(1) }
	for session := 0; ctx.Err() == nil; session++ {
		sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", Timeout: ptr(int64(0))})
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
			if _, err := c.Files.Write(ctx, sb.SandboxID, path, strings.NewReader(body), 0o644, ""); fail("write", err) {
				return
			}
			res, err := c.Commands.ExecWait(ctx, sb.SandboxID, sh("wc -l < "+path+"; ls /workspace | wc -l"))
			if fail("exec", err) {
				return
			}
			if err == nil && !strings.HasPrefix(res.Stdout, "50\n") {
				errs <- fmt.Errorf("client %d: exec saw %q", n, res.Stdout)
				return
			}
			params, _ := json.Marshal(map[string]any{"path": path, "oldString": fmt.Sprintf("turn %d\n", turn), "newString": "edited\n", "replaceAll": true})
			if tr, err := c.Tools.Call(ctx, sb.SandboxID, "edit", client.ToolCall{Params: params}, nil); fail("edit tool", err) {
				return
			} else if err == nil && tr.IsError {
				errs <- fmt.Errorf("client %d: edit tool: %s", n, tr.Content)
				return
			}
			rc, err := c.Files.Read(ctx, sb.SandboxID, path)
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
			snap, err := c.Snapshots.Turn(ctx, sb.SandboxID)
			if fail("turn", err) {
				return
			}
			turns = append(turns, snap.SnapshotID)
			if turn == 5 {
				if _, err := c.Snapshots.Rollback(ctx, sb.SandboxID, client.RollbackRequest{SnapshotID: turns[2]}); fail("rollback", err) {
					return
				}
			}
			count()
		}
		if err := c.Sandboxes.Delete(context.WithoutCancel(ctx), sb.SandboxID); err != nil {
			errs <- fmt.Errorf("client %d: delete: %w", n, err)
			return
		}
	}
}

// TestTortureSoak runs agent-like clients against one daemon for a while:
// no error at all; the daemon's RSS, live heap, goroutines and open files
// grow no faster than their bounds once warm (see maxRSSSlope); and once
// every sandbox is gone it holds no file of one and runs as many
// goroutines as before.
func TestTortureSoak(t *testing.T) {
	// Serial: its slopes (RSS, goroutines, files) must be the daemon's own, not a neighbour's load.
	clients, dur := soakScale()
	// The profiler's memory statistics split the daemon's RSS into what
	// Go's runtime holds and the rest (SQLite's page caches, which the
	// pure-Go driver allocates outside the Go heap; the binary's pages).
	pprofAddr := freePort(t)
	d := busyboxDaemon(t, "--default-timeout", "0", "--pprof", pprofAddr)
	c := d.client()
	pid := d.cmd.Process.Pid
	// Warm up: the first sandbox opens the pool, the database, the logs.
	if _, _, err := c.Sandboxes.List(ctxT(t, time.Minute), client.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	fdsBefore := openFiles(pid)
	goroutinesBefore, _ := goroutines(pprofAddr)

	// The run lasts dur, and longer (up to 3 × dur) on a machine so slow
	// that by then the warm-up has not ended or fewer than soakMinOps
	// operations came after it: too few to fit a slope to.
	ctx, cancel := context.WithTimeout(context.Background(), 3*dur)
	defer cancel()
	errs := make(chan error, 1000)
	var ops atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			soakAgent(ctx, c, i, errs, &ops)
		}(i)
	}
	var samples []soakSample
	start := time.Now()
	tick := time.NewTicker(time.Second)
	warm := -1.0 // the operations done by the end of the warm-up, once it ended
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-tick.C:
			if n := float64(ops.Load()); warm < 0 && time.Since(start) >= soakWarmupOf(dur) && n >= soakWarmupOps {
				warm = n
			} else if warm >= 0 && time.Since(start) >= dur && n-warm >= soakMinOps {
				cancel()
				done = true
			}
			s := soakSample{at: time.Since(start), ops: float64(ops.Load()), rss: float64(rssKB(pid)), anon: float64(statusKB(pid, "RssAnon:")), fds: float64(openFiles(pid))}
			if m, err := goMemStats(pprofAddr); err == nil {
				s.heap = float64(m["HeapInuse"]) / 1024
				s.live = float64(m["HeapAlloc"]) / 1024
				s.goRes = float64(m["Sys"]-m["HeapReleased"]) / 1024
				s.rest = s.rss - s.goRes
				s.idle = float64(m["HeapIdle"]-m["HeapReleased"]) / 1024
				s.stacks = float64(m["Stack"]) / 1024
			}
			all, drops := goroutines(pprofAddr)
			s.goroutines, s.drops = float64(all-drops), float64(drops)
			samples = append(samples, s)
		}
	}
	tick.Stop()
	cancel()
	wg.Wait()
	close(errs)
	// A client that stopped on an error left its sandbox: delete it too.
	cleanup := ctxT(t, 2*time.Minute)
	for _, sb := range listAll(t, cleanup, c) {
		if err := c.Sandboxes.Delete(cleanup, sb.SandboxID); err != nil && client.StatusCode(err) != 404 {
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
	checkSoakSlopes(t, samples, warm)
	if len(samples) > 0 {
		// RSS also counts the binary's pages as code paths are first run,
		// and the Go heap growing to its working size: the second half's
		// slope of anonymous memory is the one a leak would show in.
		h := len(samples) / 2
		t.Logf("soak: %d clients for %s: %d turns and sessions, %d errors; daemon RSS %.0f → %.0f KiB (slope %.0f KiB/min; anonymous %.0f → %.0f KiB, second half's slope %.0f KiB/min), open files %.0f → %.0f (slope %.1f/min)",
			clients, samples[len(samples)-1].at.Round(time.Second), ops.Load(), n, rss[0], rss[len(rss)-1], slope(xs, rss), anon[0], anon[len(anon)-1], slope(xs[h:], anon[h:]),
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
	// And it runs no goroutine of one: as many as before, give or take the
	// slack, once the calls' last goroutines have ended. The drops are left
	// out: each waits quietWaitMax (30 s) at most, longer than this test.
	var all, drops int
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		all, drops = goroutines(pprofAddr)
		if all-drops <= goroutinesBefore+goroutineSlack {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("after every sandbox was deleted the daemon runs %d goroutines (and %d drops waiting), %d before the soak:%s",
				all-drops, drops, goroutinesBefore, goroutineStacks(pprofAddr))
			break
		}
	}
	t.Logf("goroutines: %d before the soak, %d after every sandbox is gone and %d drops waiting", goroutinesBefore, all-drops, drops)
}

// soakSample is what the soak reads of the daemon at one moment: memory in
// KiB, and how many operations (sessions and turns) the clients had done.
type soakSample struct {
	at                                time.Duration
	ops, live                         float64
	rss, anon, fds, heap, goRes, rest float64
	idle, stacks                      float64
	// goroutines does not count drops, the rollbacks' old roots waiting
	// for a quiet pool (see goroutines).
	goroutines, drops float64
}

// The soak's bounds on the daemon's growth. Each is the least-squares
// slope of a measure against the operations done, over the samples after
// the warm-up, per 1000 operations (an operation is a session or a turn;
// a turn is five calls: write, exec, edit tool, read, turn snapshot, so
// sessions are about a ninth of them). Per operation rather than per
// minute: a slow shared machine that does less work is held to the same
// bound. What the measures hold at any moment moves with the calls in
// flight and the sandboxes alive (each holds goroutines, files, buffers),
// so a 40-second run's slopes scatter around zero: on a 2-core machine
// under a load of 15 to 20, with 370 to 640 operations fitted, RSS 0.5 to
// 7.3 MiB, live heap -1.4 to 2.4 MiB, goroutines -6 to 22 and open files
// -18 to 22 per 1000. Each bound is well above that scatter and well below
// what one object leaked per turn fits to: with a goroutine or a file
// leaked per exec, 892 and 895 per 1000.
const (
	// soakWarmup is the share of the run not fitted, and soakWarmupOps the
	// operations it takes at least: the Go heap growing to its working
	// size, SQLite's page caches filling, the binary's pages first touched,
	// every client's first sandbox starting.
	soakWarmup    = 0.25
	soakWarmupOps = 200
	// soakMinOps is how many operations the fit needs after the warm-up
	// for the scatter above to stay well under the bounds.
	soakMinOps = 300
	// maxRSSSlope, KiB per 1000 operations: 32 KiB an operation. RSS moves
	// by megabytes from one sample to the next (garbage not yet collected,
	// freed pages the runtime has not returned), so its bound is the
	// loosest: it catches a buffer or a sandbox's state kept for ever, not
	// a goroutine (a few KiB), which its own bound catches.
	maxRSSSlope = 32 << 10
	// maxLiveHeapSlope, KiB per 1000 operations: 8 KiB an operation. The
	// live heap (read just after a collection) is what a leak of Go
	// objects grows, without RSS's garbage and idle pages.
	maxLiveHeapSlope = 8 << 10
	// maxGoroutineSlope, goroutines per 1000 operations, not counting the
	// rollbacks' old roots waiting for a quiet pool (see goroutines): those
	// pile up for quietWaitMax (30 s) before the first ends, most of a
	// short run, and fit to about one per session (110 per 1000).
	maxGoroutineSlope = 150
	// maxFDSlope, open files per 1000 operations.
	maxFDSlope = 150
	// goroutineSlack is how many more goroutines than before the soak the
	// daemon may run once every sandbox is gone (not counting the drops):
	// idle keep-alive connections of the clients, a database connection
	// opener.
	goroutineSlack = 5
)

// soakWarmupOf is how long the warm-up of a run of dur lasts.
func soakWarmupOf(dur time.Duration) time.Duration {
	return time.Duration(soakWarmup * float64(dur))
}

// checkSoakSlopes fails the test when the daemon's RSS, live heap,
// goroutines or open files grew faster than their bound after the warm-up,
// which ended once warm operations were done (-1: it never did).
func checkSoakSlopes(t *testing.T, samples []soakSample, warm float64) {
	t.Helper()
	var fitted []soakSample
	for _, s := range samples {
		if warm >= 0 && s.ops >= warm {
			fitted = append(fitted, s)
		}
	}
	if len(fitted) < 10 || fitted[len(fitted)-1].ops-fitted[0].ops < soakMinOps {
		t.Errorf("soak: after the warm-up (%.0f operations), %d samples and fewer than %d operations in three times the run's length: too few to fit a slope to",
			warm, len(fitted), soakMinOps)
		return
	}
	kops := make([]float64, len(fitted))
	for i, s := range fitted {
		kops[i] = s.ops / 1000
	}
	failed := false
	for _, m := range []struct {
		name, unit string
		bound      float64
		y          func(soakSample) float64
	}{
		{"RSS", "KiB", maxRSSSlope, func(s soakSample) float64 { return s.rss }},
		{"live heap", "KiB", maxLiveHeapSlope, func(s soakSample) float64 { return s.live }},
		{"goroutines", "goroutines", maxGoroutineSlope, func(s soakSample) float64 { return s.goroutines }},
		{"open files", "files", maxFDSlope, func(s soakSample) float64 { return s.fds }},
	} {
		ys := make([]float64, len(fitted))
		for i, s := range fitted {
			ys[i] = m.y(s)
		}
		got := slope(kops, ys)
		verdict := "within"
		if got > m.bound {
			verdict = "OVER"
			failed = true
			t.Errorf("soak: the daemon's %s grew by %.1f %s per 1000 operations after the warm-up; the bound is %.0f", m.name, got, m.unit, m.bound)
		}
		t.Logf("soak slope: %s %.0f → %.0f %s over %.0f operations after the warm-up: %.1f per 1000, %s the bound of %.0f",
			m.name, ys[0], ys[len(ys)-1], m.unit, fitted[len(fitted)-1].ops-fitted[0].ops, got, verdict, m.bound)
	}
	if failed || os.Getenv("WARREN_SOAK_SAMPLES") != "" {
		var b strings.Builder
		for _, s := range fitted {
			fmt.Fprintf(&b, "\n  %6.1fs %6.0f ops  RSS %7.0f KiB  live heap %6.0f KiB  goroutines %5.0f (+%3.0f drops)  open files %4.0f",
				s.at.Seconds(), s.ops, s.rss, s.live, s.goroutines, s.drops, s.fds)
		}
		t.Logf("soak samples after the warm-up:%s", b.String())
	}
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
// page (its "# Name = value" lines), in bytes. The page is asked to collect
// garbage first (gc=1), so HeapAlloc is the live heap.
func goMemStats(addr string) (map[string]uint64, error) {
	resp, err := http.Get("http://" + addr + "/debug/pprof/heap?debug=1&gc=1")
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

// goroutineStacks is the start of the daemon's goroutine profile, for a
// failure's message.
func goroutineStacks(addr string) string {
	resp, err := http.Get("http://" + addr + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<10))
	return "\n" + string(b)
}

// goroutines reads the daemon's goroutine count from the profiler, and how
// many of them are a rollback's old root waiting to be dropped (see
// oldRootDrops in internal/sandbox); 0, 0 when it cannot.
func goroutines(addr string) (total, drops int) {
	resp, err := http.Get("http://" + addr + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		return 0, 0
	}
	defer resp.Body.Close()
	// "goroutine profile: total N", then groups: "N @ pc…" and a line
	// "#\tpc\tfunction+off\tfile:line" for each frame of their stack.
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	group := 0
	for sc.Scan() {
		l := sc.Text()
		if n, ok := strings.CutPrefix(l, "goroutine profile: total "); ok {
			total, _ = strconv.Atoi(strings.TrimSpace(n))
		} else if n, _, ok := strings.Cut(l, " @ "); ok {
			group, _ = strconv.Atoi(n)
		} else if strings.Contains(l, "sandbox.(*oldRootDrops).waitQuiet") {
			drops += group
		}
	}
	return total, drops
}
