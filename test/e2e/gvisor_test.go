package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/testutil"
)

// requireRunsc returns the runsc the tests use. `make test` builds it and
// sets WARREN_RUNSC, so its absence is a failure.
func requireRunsc(t *testing.T) string {
	t.Helper()
	p := os.Getenv("WARREN_RUNSC")
	if p == "" {
		testutil.Missing(t, "WARREN_RUNSC is not set: the gvisor runtime needs runsc; `make runsc` builds it and `make test` sets it")
	}
	if _, err := os.Stat(p); err != nil {
		testutil.Missing(t, "runsc %s is missing (%v): build it with `make runsc`", p, err)
	}
	return p
}

// gvisorDaemon starts a daemon with the gvisor runtime and the busybox
// template `bb`. runsc being there but unusable is a failure.
func gvisorDaemon(t *testing.T, extra ...string) *daemon {
	t.Helper()
	runsc := requireRunsc(t)
	d := busyboxDaemon(t, append([]string{"--runsc", runsc}, extra...)...)
	h, err := d.client().Meta.Health(ctxT(t, 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	rt, ok := runtimeInfo(h, "gvisor")
	if !ok || !rt.Available {
		t.Fatalf("runsc %s is there but the gvisor runtime is not available: %+v", runsc, rt)
	}
	return d
}

func runtimeInfo(h client.Health, name string) (client.RuntimeInfo, bool) {
	if h.Capabilities == nil {
		return client.RuntimeInfo{}, false
	}
	for _, r := range h.Capabilities.Runtimes {
		if r.Name == name {
			return r, true
		}
	}
	return client.RuntimeInfo{}, false
}

// gvisorLeftovers adds what the gvisor runtime keeps per sandbox (its
// bundle, runsc's state, its processes) to leftovers.
func gvisorLeftovers(t *testing.T, dataDir, id string) []string {
	t.Helper()
	found := leftovers(t, dataDir, id)
	for _, dir := range []string{"runtime/gvisor/sandboxes", "runtime/gvisor/runsc"} {
		entries, _ := os.ReadDir(filepath.Join(dataDir, dir))
		for _, e := range entries {
			if strings.Contains(e.Name(), id) {
				found = append(found, "file: "+filepath.Join(dataDir, dir, e.Name()))
			}
		}
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		data, err := os.ReadFile(p)
		if err == nil && bytes.Contains(data, []byte(id)) {
			found = append(found, "process: "+p+": "+strings.ReplaceAll(string(data), "\x00", " "))
		}
	}
	return found
}

func sh(script string) client.ExecRequest {
	return client.ExecRequest{Cmd: []string{"/bin/sh", "-c", script}}
}

// One gvisor sandbox through the API: commands, files, a background
// process, pause and resume, a kill -9 of the daemon, a fork, and a delete
// that leaves nothing behind.
func TestGVisorSandbox(t *testing.T) {
	t.Parallel()
	d := gvisorDaemon(t)
	ctx := ctxT(t, 5*time.Minute)
	c := d.client()
	sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", Runtime: "gvisor"})
	if err != nil {
		t.Fatal(err)
	}
	id := sb.SandboxID
	if det, err := c.Sandboxes.Get(ctx, id); err != nil || det.Runtime != "gvisor" || det.State != "running" {
		t.Fatalf("GetSandbox = %+v, %v; want a running gvisor sandbox", det, err)
	}

	// Commands run in gVisor's kernel.
	res, err := c.Commands.ExecWait(ctx, id, sh("uname -r; echo out; echo err >&2; exit 3"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Stdout, "gvisor") || !strings.Contains(res.Stdout, "out\n") || res.Stderr != "err\n" || res.ExitCode != 3 {
		t.Fatalf("exec = %+v", res)
	}
	if got := d.mustCLI("exec", id, "--", "cat", "/proc/version"); !strings.Contains(got, "gvisor") {
		t.Errorf("CLI exec: /proc/version = %q", got)
	}

	// Files, both ways.
	content := "hello from the host\n"
	if _, err := c.Files.Write(ctx, id, "/workspace/hello.txt", strings.NewReader(content), 0o644, ""); err != nil {
		t.Fatal(err)
	}
	if res, err := c.Commands.ExecWait(ctx, id, sh("cat /workspace/hello.txt; echo made inside > /workspace/inside.txt")); err != nil || res.Stdout != content {
		t.Fatalf("cat of a written file = %+v, %v", res, err)
	}
	rc, err := c.Files.Read(ctx, id, "/workspace/inside.txt")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	if string(got) != "made inside\n" {
		t.Errorf("read file = %q", got)
	}

	// A background process counting in memory, printing and writing it.
	p, err := c.Processes.Start(ctx, id, client.StartProcessRequest{Tag: "ticker", ExecRequest: sh(
		`i=0; while :; do i=$((i+1)); echo "tick $i"; echo $i > /workspace/counter.tmp; mv /workspace/counter.tmp /workspace/counter; sleep 0.05; done`)})
	if err != nil {
		t.Fatal(err)
	}
	counter := func() int {
		t.Helper()
		res, err := c.Commands.ExecWait(ctx, id, sh("cat /workspace/counter"))
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(strings.TrimSpace(res.Stdout))
		return n
	}
	waitAbove := func(n int) int {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			if v := counter(); v > n {
				return v
			}
			if time.Now().After(deadline) {
				t.Fatalf("counter stuck at or below %d", n)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	before := waitAbove(2)
	var out bytes.Buffer
	if _, err := c.Processes.Output(ctx, id, "ticker", client.OutputOptions{}, func(e client.ProcessEvent) error {
		out.Write(e.Data)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "tick 1\n") {
		t.Errorf("background output = %q", out.String())
	}

	// Pause and resume: the same process carries on counting.
	if err := c.Lifecycle.Pause(ctx, id); err != nil {
		t.Fatal(err)
	}
	if det, err := c.Sandboxes.Get(ctx, id); err != nil || det.State != "paused" {
		t.Fatalf("after pause: %+v, %v", det, err)
	}
	if _, err := c.Lifecycle.Resume(ctx, id); err != nil {
		t.Fatal(err)
	}
	resumed := waitAbove(before)
	procs, err := c.Processes.List(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if !hasRunning(procs, p.PID) {
		t.Errorf("after resume the ticker (pid %d) is gone: %+v", p.PID, procs)
	}

	// kill -9 of the daemon: the sandbox and its process live on, and the
	// restarted daemon reattaches to them.
	d.stop(syscall.SIGKILL)
	d.start()
	c = d.client()
	if det, err := c.Sandboxes.Get(ctx, id); err != nil || det.State != "running" || det.Runtime != "gvisor" {
		t.Fatalf("after a daemon kill: %+v, %v", det, err)
	}
	waitAbove(resumed)
	procs, err = c.Processes.List(ctx, id)
	if err != nil || !hasRunning(procs, p.PID) {
		t.Errorf("after a daemon kill the ticker (pid %d) is gone: %+v, %v", p.PID, procs, err)
	}

	// A fork keeps its parent's runtime and files.
	forks, err := c.Snapshots.Fork(ctx, id, client.ForkRequest{})
	if err != nil || len(forks) != 1 || forks[0].Sandbox == nil {
		t.Fatalf("fork: %+v, %v", forks, err)
	}
	fid := forks[0].Sandbox.SandboxID
	if det, err := c.Sandboxes.Get(ctx, fid); err != nil || det.Runtime != "gvisor" {
		t.Errorf("fork: %+v, %v; want runtime gvisor", det, err)
	}
	if res, err := c.Commands.ExecWait(ctx, fid, sh("cat /workspace/hello.txt; uname -r")); err != nil || !strings.HasPrefix(res.Stdout, content) || !strings.Contains(res.Stdout, "gvisor") {
		t.Errorf("in the fork: %+v, %v", res, err)
	}

	// Delete leaves nothing: runsc state, bundle, cgroups, mounts, processes.
	for _, sid := range []string{fid, id} {
		if err := c.Sandboxes.Delete(ctx, sid); err != nil {
			t.Fatal(err)
		}
		if left := gvisorLeftovers(t, d.dataDir, sid); len(left) > 0 {
			t.Errorf("deleted sandbox %s left:\n%s", sid, strings.Join(left, "\n"))
		}
	}
}

func hasRunning(procs []client.ProcessInfo, pid int32) bool {
	for _, p := range procs {
		if p.PID == pid && p.State == "running" {
			return true
		}
	}
	return false
}

// E2B's create (POST /sandboxes with X-API-Key) takes runtime "gvisor";
// health lists the runtimes; a runtime that does not exist is a 400.
func TestGVisorE2BCreate(t *testing.T) {
	t.Parallel()
	d := gvisorDaemon(t)
	ctx := ctxT(t, 2*time.Minute)
	code, body := d.postAPI(ctx, "/sandboxes", `{"templateID":"bb","timeout":120,"runtime":"gvisor","metadata":{"who":"e2b"}}`)
	if code != http.StatusCreated {
		t.Fatalf("E2B create with runtime gvisor: %d %s", code, body)
	}
	var sb client.Sandbox
	if err := json.Unmarshal([]byte(body), &sb); err != nil || sb.SandboxID == "" || sb.EnvdAccessToken == "" {
		t.Fatalf("create answer %s: %v", body, err)
	}
	c := d.client()
	if det, err := c.Sandboxes.Get(ctx, sb.SandboxID); err != nil || det.Runtime != "gvisor" {
		t.Fatalf("GetSandbox: %+v, %v", det, err)
	}
	if res, err := c.Commands.ExecWait(ctx, sb.SandboxID, sh("uname -r")); err != nil || !strings.Contains(res.Stdout, "gvisor") {
		t.Errorf("exec: %+v, %v", res, err)
	}
	code, body = d.postAPI(ctx, "/sandboxes", `{"templateID":"bb","runtime":"kvm"}`)
	if code != http.StatusBadRequest || !strings.Contains(body, "kvm") {
		t.Errorf("create with an unknown runtime: %d %s; want 400 naming it", code, body)
	}
	h, err := c.Meta.Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	gv, _ := runtimeInfo(h, "gvisor")
	nat, _ := runtimeInfo(h, "native")
	if !gv.Available || gv.Version == "" || !gv.Pause || !nat.Available || !nat.Default || h.Runtime != "native" {
		t.Errorf("health runtimes = %+v (runtime %q)", h.Capabilities.Runtimes, h.Runtime)
	}
	if err := c.Sandboxes.Delete(ctx, sb.SandboxID); err != nil {
		t.Fatal(err)
	}
	if left := gvisorLeftovers(t, d.dataDir, sb.SandboxID); len(left) > 0 {
		t.Errorf("deleted sandbox left:\n%s", strings.Join(left, "\n"))
	}
}

// --default-runtime gvisor: creates that name no runtime get gVisor.
func TestGVisorDefaultRuntime(t *testing.T) {
	t.Parallel()
	d := gvisorDaemon(t, "--default-runtime", "gvisor")
	ctx := ctxT(t, 2*time.Minute)
	c := d.client()
	sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb"})
	if err != nil {
		t.Fatal(err)
	}
	if det, err := c.Sandboxes.Get(ctx, sb.SandboxID); err != nil || det.Runtime != "gvisor" {
		t.Fatalf("GetSandbox: %+v, %v", det, err)
	}
	out := d.mustCLI("sandbox", "create", "--template", "bb", "--runtime", "native")
	nid := strings.TrimSpace(out)
	if det, err := c.Sandboxes.Get(ctx, nid); err != nil || det.Runtime != "native" {
		t.Fatalf("--runtime native: %+v, %v", det, err)
	}
	if res, err := c.Commands.ExecWait(ctx, nid, sh("uname -r")); err != nil || strings.Contains(res.Stdout, "gvisor") {
		t.Errorf("a native sandbox runs in gVisor: %+v, %v", res, err)
	}

	// A graceful stop reaches the agent (PID 1 in gVisor), which passes
	// SIGTERM on: a process that exits on it ends the sandbox well within
	// the grace.
	if _, err := c.Processes.Start(ctx, sb.SandboxID, client.StartProcessRequest{
		ExecRequest: sh("trap 'echo bye > /workspace/bye; exit 0' TERM; while :; do sleep 0.1; done")}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the shell installs its trap
	det, err := c.Lifecycle.Stop(ctx, sb.SandboxID, 20*time.Second, false)
	if err != nil || det.State != "stopped" {
		t.Fatalf("graceful stop: %+v, %v", det, err)
	}
	evs, _ := c.Sandboxes.Events(ctx, sb.SandboxID, 0)
	if last := evs[len(evs)-1]; last.Kind != "stopped" || strings.Contains(last.Detail, "killed after") {
		t.Errorf("stop event: %+v; want a graceful stop", last)
	}
}

// Without a usable runsc the gvisor runtime is refused with the reason
// (501), and the native runtime keeps working.
func TestGVisorUnavailable(t *testing.T) {
	t.Parallel()
	d := busyboxDaemon(t, "--runsc", "/nonexistent/runsc")
	ctx := ctxT(t, 2*time.Minute)
	c := d.client()
	h, err := c.Meta.Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	gv, ok := runtimeInfo(h, "gvisor")
	if !ok || gv.Available || !strings.Contains(gv.Error, "runsc") {
		t.Errorf("health's gvisor runtime = %+v; want unavailable, naming runsc", gv)
	}
	_, err = c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", Runtime: "gvisor"})
	if client.StatusCode(err) != http.StatusNotImplemented || !strings.Contains(err.Error(), "runsc") {
		t.Errorf("gvisor create without runsc = %v; want 501 naming runsc", err)
	}
	_, errOut, code := d.cli("", "sandbox", "create", "--template", "bb", "--runtime", "gvisor")
	if code == 0 || !strings.Contains(errOut, "runsc") {
		t.Errorf("CLI gvisor create without runsc: exit %d, %s", code, errOut)
	}
	sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb"})
	if err != nil {
		t.Fatalf("native create: %v", err)
	}
	if res, err := c.Commands.ExecWait(ctx, sb.SandboxID, sh("echo ok")); err != nil || res.Stdout != "ok\n" {
		t.Errorf("native exec: %+v, %v", res, err)
	}
	list, _, err := c.Sandboxes.List(ctx, client.ListOptions{})
	if err != nil || len(list) != 1 {
		t.Errorf("sandboxes after a refused gvisor create: %+v, %v", list, err)
	}
}

// TestGVisorNumbers prints, as JSON, the gvisor runtime's costs beside the
// native runtime's, measured through the API of one daemon: create to the
// first output of a command, an exec round trip through the agent, and a
// pause plus resume. Only with WARREN_GVISOR_NUMBERS=1; nothing is
// asserted on the times.
func TestGVisorNumbers(t *testing.T) {
	// Serial: it measures.
	if os.Getenv("WARREN_GVISOR_NUMBERS") == "" {
		t.Skip("set WARREN_GVISOR_NUMBERS=1 to measure")
	}
	d := gvisorDaemon(t)
	ctx := ctxT(t, 10*time.Minute)
	c := d.client()
	const creates, execs, pauses = 10, 100, 20
	report := map[string]map[string]any{}
	for _, rt := range []string{"native", "gvisor"} {
		var create, execRT, pauseRT []time.Duration
		for i := 0; i < creates; i++ {
			start := time.Now()
			sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", Runtime: rt})
			if err != nil {
				t.Fatal(err)
			}
			if res, err := c.Commands.ExecWait(ctx, sb.SandboxID, client.ExecRequest{Cmd: []string{"echo", "hi"}}); err != nil || res.Stdout != "hi\n" {
				t.Fatalf("first exec: %+v, %v", res, err)
			}
			create = append(create, time.Since(start))
			if err := c.Sandboxes.Delete(ctx, sb.SandboxID); err != nil {
				t.Fatal(err)
			}
		}
		sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", Runtime: rt})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < execs; i++ {
			start := time.Now()
			if _, err := c.Commands.ExecWait(ctx, sb.SandboxID, client.ExecRequest{Cmd: []string{"true"}}); err != nil {
				t.Fatal(err)
			}
			execRT = append(execRT, time.Since(start))
		}
		for i := 0; i < pauses; i++ {
			start := time.Now()
			if err := c.Lifecycle.Pause(ctx, sb.SandboxID); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Lifecycle.Resume(ctx, sb.SandboxID); err != nil {
				t.Fatal(err)
			}
			pauseRT = append(pauseRT, time.Since(start))
		}
		if err := c.Sandboxes.Delete(ctx, sb.SandboxID); err != nil {
			t.Fatal(err)
		}
		report[rt] = map[string]any{
			"create_to_first_output_ms": quantiles(create),
			"exec_round_trip_ms":        quantiles(execRT),
			"pause_resume_ms":           quantiles(pauseRT),
		}
	}
	out, _ := json.MarshalIndent(report, "", "  ")
	fmt.Println(string(out))
}

// quantiles returns p50 and p90 in milliseconds.
func quantiles(ds []time.Duration) map[string]float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(q float64) float64 {
		return float64(s[int(q*float64(len(s)-1))].Microseconds()) / 1000
	}
	return map[string]float64{"p50": at(0.5), "p90": at(0.9), "n": float64(len(s))}
}

// Escape attempts as root inside a gvisor sandbox fail, as in a native one
// (TestIsolation): no mount, no host /proc/sys or sysrq, no host process
// or root in sight, a fork bomb held by the pids limit with the sandbox
// alive; and a memory-limit hit, which in gVisor takes the whole sandbox
// (the host's OOM killer sees gVisor's kernel as one process), takes only
// that sandbox: another one keeps answering.
func TestGVisorIsolation(t *testing.T) {
	t.Parallel()
	d := gvisorDaemon(t)
	c := d.client()
	ctx := ctxT(t, 3*time.Minute)
	sb, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", Runtime: "gvisor", Limits: &client.Limits{MemoryMB: 64, Pids: 64}})
	if err != nil {
		t.Fatal(err)
	}
	other, err := c.Sandboxes.Create(ctx, client.NewSandbox{TemplateID: "bb", Runtime: "gvisor"})
	if err != nil {
		t.Fatal(err)
	}
	hostLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hostLn.Close()
	accepted := make(chan struct{}, 8)
	go func() {
		for {
			conn, err := hostLn.Accept()
			if err != nil {
				return
			}
			accepted <- struct{}{}
			conn.Close()
		}
	}()
	_, hostPort, _ := net.SplitHostPort(hostLn.Addr().String())
	_, daemonPort, _ := net.SplitHostPort(d.addr)
	run := func(id, script string) client.ExecResult {
		t.Helper()
		res, err := c.Commands.ExecWait(ctx, id, client.ExecRequest{Cmd: []string{"/bin/sh", "-c", script}, User: "root", TimeoutMs: 20000})
		if err != nil {
			t.Fatalf("%s: %v", script, err)
		}
		return res
	}
	for name, script := range map[string]string{
		"mount":                 "mount -t tmpfs none /mnt",
		"write /proc/sys":       "echo 1 > /proc/sys/kernel/panic",
		"write sysrq-trigger":   "echo h > /proc/sysrq-trigger",
		"insmod":                "echo x > /tmp/x.ko; insmod /tmp/x.ko",
		"raw socket":            "ping -c 1 -W 1 127.0.0.1",
		"reach a host port":     "nc -w 2 127.0.0.1 " + hostPort + " </dev/null",
		"reach the daemon port": "nc -w 2 127.0.0.1 " + daemonPort + " </dev/null",
		"mknod a disk":          "mknod /tmp/sda b 8 0",
	} {
		if res := run(sb.SandboxID, script); res.ExitCode == 0 {
			t.Errorf("%s: succeeded inside the sandbox (stdout %q stderr %q)", name, res.Stdout, res.Stderr)
		}
	}
	if out := run(sb.SandboxID, "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '").Stdout; strings.TrimSpace(out) != "lo" {
		t.Errorf("network interfaces inside: %q, want only lo", out)
	}
	for _, line := range strings.Split(strings.TrimSpace(run(sb.SandboxID, "for f in /proc/1/fd/*; do readlink $f; done").Stdout), "\n") {
		if strings.HasPrefix(line, "/") && !strings.HasPrefix(line, "/dev/null") && !strings.HasPrefix(line, "/.warren/") &&
			!strings.HasPrefix(line, "/proc/") && !strings.HasPrefix(line, "/sys/fs/cgroup/") {
			t.Errorf("the agent (PID 1) holds %q open", line)
		}
	}
	// /proc/1/root is the sandbox's own root: a file written inside is
	// there, a file on the host is not.
	hostMarker := filepath.Join(d.dataDir, "host-marker")
	if err := os.WriteFile(hostMarker, []byte("host"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := run(sb.SandboxID, "echo inside > /workspace/marker; cat /proc/1/root/workspace/marker; test -e /proc/1/root"+hostMarker+" && echo host-visible; true").Stdout; out != "inside\n" {
		t.Errorf("/proc/1/root: %q; want the sandbox's own root (its marker only)", out)
	}
	// Only the sandbox's own processes are visible: a few (the agent, this
	// shell), none of the host's (the daemon, runsc, its gofer).
	if out := run(sb.SandboxID, "ls -d /proc/[0-9]* | wc -l").Stdout; atoi(out) > 10 {
		t.Errorf("the sandbox sees %s processes; the host's are leaking in", strings.TrimSpace(out))
	}
	// (The probe's own command line names "cmdline": proof it read them.)
	if out := run(sb.SandboxID, "cat /proc/[0-9]*/cmdline | tr '\\0' ' '").Stdout; !strings.Contains(out, "cmdline") || strings.Contains(out, "runsc") || strings.Contains(out, "serve") {
		t.Errorf("command lines of the processes seen inside: %q; want the sandbox's own only", out)
	}
	// A fork bomb is held by the pids limit (64): forks fail, the sandbox
	// stays running and usable once the bomb's sleeps end.
	bomb := run(sb.SandboxID, "i=0; while [ $i -lt 300 ]; do sleep 2 & i=$((i+1)); done 2>&1 | head -c 200; true")
	if !strings.Contains(bomb.Stdout+bomb.Stderr, "fork") {
		t.Errorf("the fork bomb was not stopped by the pids limit: %q %q", bomb.Stdout, bomb.Stderr)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		res, err := c.Commands.ExecWait(ctx, sb.SandboxID, sh("echo alive"))
		if err == nil && res.Stdout == "alive\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sandbox does not answer after the fork bomb: %+v, %v", res, err)
		}
	}
	if det, err := c.Sandboxes.Get(ctx, sb.SandboxID); err != nil || det.State != "running" {
		t.Fatalf("after the fork bomb: %+v, %v; want running", det, err)
	}
	// gVisor's own permission checks keep the agent socket root's.
	if res, err := c.Commands.ExecWait(ctx, sb.SandboxID, client.ExecRequest{Command: "test -w /.warren/run/agent.sock && echo writable || echo refused", User: "user"}); err != nil || res.Stdout != "refused\n" {
		t.Errorf("an unprivileged command and the agent socket: %+v, %v", res, err)
	}
	select {
	case <-accepted:
		t.Fatal("the host listener accepted a connection from the sandbox")
	default:
	}

	// Past its memory limit, the sandbox ends (it is marked failed); the
	// other sandbox is untouched.
	hog, err := c.Processes.Start(ctx, sb.SandboxID, client.StartProcessRequest{ExecRequest: sh(`x=$(head -c 200000000 /dev/zero | tr "\0" a); echo ${#x}`)})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		det, err := c.Sandboxes.Get(ctx, sb.SandboxID)
		if err == nil && det.State == "failed" {
			t.Logf("the sandbox ended at its memory limit: %s", det.Reason)
			break
		}
		if procs, err := c.Processes.List(ctx, sb.SandboxID); err == nil && !hasRunning(procs, hog.PID) {
			// gVisor may refuse the allocation itself: then the process
			// fails and the sandbox lives on, which is as good.
			if res, err := c.Commands.ExecWait(ctx, sb.SandboxID, sh("echo alive")); err != nil || res.Stdout != "alive\n" {
				t.Fatalf("the hog ended but the sandbox does not answer: %+v, %v", res, err)
			}
			t.Logf("the sandbox survived the allocation: %+v", procs)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the memory-limit hit: %+v, %v", det, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if res, err := c.Commands.ExecWait(ctx, other.SandboxID, sh("echo fine")); err != nil || res.Stdout != "fine\n" {
		t.Errorf("the other sandbox after the memory-limit hit: %+v, %v", res, err)
	}
}
