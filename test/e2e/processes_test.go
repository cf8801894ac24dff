package e2e

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/warrenhq/warren/client"
)

// consecutive checks that out is "0\n1\n2\n…" and returns how many lines.
func consecutive(t *testing.T, what, out string) int {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	for i, l := range lines {
		if l != strconv.Itoa(i) {
			t.Fatalf("%s: line %d is %q, want %d (gap or garbage):\n%.300s", what, i, l, i, out)
		}
	}
	return len(lines)
}

// TestBackgroundProcesses drives background processes end to end: start
// with a tag, attach, detach, replay, a daemon kill -9 while the process
// prints, signals, stdin, and the error statuses.
func TestBackgroundProcesses(t *testing.T) {
	t.Parallel()
	d, ctx, id := busyboxSandbox(t, 3*time.Minute)
	c := d.client()

	out := d.mustCLI("start", "--tag", "counter", id, "--", "sh", "-c", `i=0; while :; do echo $i; i=$((i+1)); sleep 0.05; done`)
	pid, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil || pid <= 0 {
		t.Fatalf("start printed %q", out)
	}

	// Attach, see output, disconnect.
	actx, cancel := context.WithCancel(ctx)
	var seen strings.Builder
	_, err = c.Processes.Output(actx, id, "counter", client.OutputOptions{Follow: true}, func(ev client.ProcessEvent) error {
		if ev.Type == "stdout" {
			seen.Write(ev.Data)
			if strings.Count(seen.String(), "\n") >= 5 {
				cancel()
			}
		}
		return nil
	})
	cancel()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("first attach: %v", err)
	}
	consecutive(t, "first attach", seen.String())

	// Attach again: the full replay from 0.
	replay := d.mustCLI("attach", "--no-follow", id, "counter")
	if n := consecutive(t, "second attach", replay); n < 5 {
		t.Fatalf("second attach replayed %d lines", n)
	}
	if _, err := os.Stat(filepath.Join(d.dataDir, "procs", id, "index.json")); err != nil {
		t.Fatalf("the host's process index: %v", err)
	}

	// kill -9 the daemon; the process keeps printing meanwhile.
	d.stop(syscall.SIGKILL)
	time.Sleep(1500 * time.Millisecond)
	d.start()
	c = d.client()
	list, err := c.Processes.List(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].PID != int32(pid) || list[0].Tag != "counter" || list[0].State != "running" {
		t.Fatalf("processes after the restart: %+v", list)
	}
	before := consecutive(t, "replay before the restart", replay)
	after := consecutive(t, "replay after the restart", d.mustCLI("attach", "--no-follow", id, strconv.Itoa(pid)))
	t.Logf("replay: %d lines before the daemon kill, %d after the restart", before, after)
	if after < before+15 { // 1.5 s down at 20 lines a second, less slack
		t.Fatalf("replay after the restart has %d lines, %d before it: the output printed while the daemon was down is missing", after, before)
	}

	// SIGTERM ends it; attach follows to the exit and passes its code on.
	d.mustCLI("kill", id, "counter")
	attachOut, _, code := d.cli("", "attach", id, "counter")
	if code != 128+15 {
		t.Fatalf("attach after SIGTERM exited %d", code)
	}
	consecutive(t, "final replay", attachOut)
	list, err = c.Processes.List(ctx, id)
	if err != nil || len(list) != 1 || list[0].State != "exited" || list[0].ExitCode == nil || *list[0].ExitCode != 143 {
		t.Fatalf("listed after SIGTERM: %+v %v", list, err)
	}
	if ps := d.mustCLI("ps", id); !strings.Contains(ps, "counter") || !strings.Contains(ps, "exited") || !strings.Contains(ps, "143") {
		t.Fatalf("warren ps:\n%s", ps)
	}

	// Stdin round trip with cat.
	p, err := c.Processes.Start(ctx, id, client.StartProcessRequest{ExecRequest: client.ExecRequest{Cmd: []string{"cat"}}, Tag: "cat"})
	if err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := d.cli("hello\nworld\n", "send-input", id, "cat"); code != 0 {
		t.Fatalf("send-input: %d %s", code, errOut)
	}
	if err := c.Processes.SendInput(ctx, id, strconv.Itoa(int(p.PID)), []byte("third\n")); err != nil {
		t.Fatal(err)
	}
	if err := c.Processes.CloseStdin(ctx, id, "cat"); err != nil {
		t.Fatal(err)
	}
	var catOut strings.Builder
	exit, err := c.Processes.Attach(ctx, id, "cat", client.OutputOptions{Follow: true}, &catOut, nil)
	if err != nil || exit == nil || exit.ExitCode == nil || *exit.ExitCode != 0 || catOut.String() != "hello\nworld\nthird\n" {
		t.Fatalf("cat: %q exit %+v err %v", catOut.String(), exit, err)
	}

	// Errors: a signal outside the allowed set, unknown tags and pids.
	if err := c.Processes.Signal(ctx, id, "cat", "SIGSEGV"); client.StatusCode(err) != 400 {
		t.Fatalf("SIGSEGV: %v", err)
	}
	if err := c.Processes.Signal(ctx, id, "nope", "SIGTERM"); client.StatusCode(err) != 404 {
		t.Fatalf("signal an unknown tag: %v", err)
	}
	if _, err := c.Processes.Output(ctx, id, "nope", client.OutputOptions{}, nil); client.StatusCode(err) != 404 {
		t.Fatalf("output of an unknown tag: %v", err)
	}
	if err := c.Processes.SendInput(ctx, id, "99999", []byte("x")); client.StatusCode(err) != 404 {
		t.Fatalf("stdin of an unknown pid: %v", err)
	}
	if _, err := c.Processes.Start(ctx, id, client.StartProcessRequest{ExecRequest: client.ExecRequest{Cmd: []string{"true"}}, Tag: "bad/tag"}); client.StatusCode(err) != 400 {
		t.Fatalf("a bad tag: %v", err)
	}

	// Deleting the sandbox removes its process output from the host.
	if err := c.Sandboxes.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(d.dataDir, "procs", id)); !os.IsNotExist(err) {
		t.Fatalf("process output of a deleted sandbox: %v", err)
	}
}
