package gvisor

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A runsc that hangs — with a child holding its output pipes, as runsc's
// own helpers would — returns an error at its deadline instead of holding
// the sandbox's lock for ever. No root needed: runsc is a script here.
func TestRunscCallsHaveADeadline(t *testing.T) {
	dir := t.TempDir()
	script, pidFile := filepath.Join(dir, "runsc"), filepath.Join(dir, "child.pid")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nsleep 600 &\necho $! > "+pidFile+"\nwait\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // the child outlives the killed script: end it
		if b, err := os.ReadFile(pidFile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	rc := &runsc{bin: script, root: t.TempDir(), callTimeout: 100 * time.Millisecond}
	start := time.Now()
	_, err := rc.state(context.Background(), "sb")
	took := time.Since(start)
	if err == nil {
		t.Fatal("a hung runsc state answered without error")
	}
	if took > time.Minute {
		t.Fatalf("a hung runsc state took %v, want about its deadline (100ms) plus at most %v", took, waitDelay)
	}
	t.Logf("hung runsc state gave up after %v: %v", took.Round(time.Millisecond), err)
}
