package reaper

import (
	"context"
	"syscall"
	"testing"
	"time"
)

func TestDeliversOwnStatusAndReapsOthers(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := New(nil)
	go r.Run(ctx)

	// A child that exits at once still gets its status delivered.
	for i := 0; i < 20; i++ {
		pid, ch, err := r.Start(func() (int, error) {
			return syscall.ForkExec("/bin/sh", []string{"sh", "-c", "exit 7"}, &syscall.ProcAttr{})
		})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case ws := <-ch:
			if ws.ExitStatus() != 7 {
				t.Fatalf("pid %d: exit %d, want 7", pid, ws.ExitStatus())
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("pid %d: no status", pid)
		}
	}

	// A child started behind the reaper's back is reaped, not left a zombie.
	pid, err := syscall.ForkExec("/bin/true", []string{"true"}, &syscall.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if err := syscall.Kill(pid, 0); err == syscall.ESRCH {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d was not reaped", pid)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := len(r.Tracked()); n != 0 {
		t.Fatalf("%d pids still tracked", n)
	}
}
