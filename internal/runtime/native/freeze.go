package native

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// freezerWait bounds how long freezeV1 waits for a cgroup v1 freezer to
// say FROZEN before leaving the freeze to libcontainer.
const freezerWait = 100 * time.Millisecond

// freezeV1 freezes the cgroup v1 freezer at dir and waits until every task
// in it is frozen, rereading the state at growing intervals (20 µs to
// 1 ms). It reports false, with the cgroup left FREEZING, when that takes
// longer than freezerWait.
//
// libcontainer's own loop rewrites FROZEN and rereads the state, and after
// 50 reads that still say FREEZING it thaws and sleeps 10 ms before trying
// again (to get ahead of processes that keep forking). A task in an
// uninterruptible sleep — writing back a file, say — freezes only once it
// wakes, later than 50 quick reads: about one turn snapshot in ten paid
// those 10 ms inside its freeze. Waiting without thawing freezes as soon as
// it wakes.
func freezeV1(dir string) (bool, error) {
	state := filepath.Join(dir, "freezer.state")
	if err := os.WriteFile(state, []byte("FROZEN"), 0); err != nil {
		return false, fmt.Errorf("freeze %s: %w", dir, err)
	}
	deadline := time.Now().Add(freezerWait)
	wait := 20 * time.Microsecond
	for {
		b, err := os.ReadFile(state)
		if err != nil {
			return false, fmt.Errorf("read %s: %w", state, err)
		}
		switch s := string(bytes.TrimSpace(b)); s {
		case "FROZEN":
			return true, nil
		case "FREEZING":
		default:
			return false, fmt.Errorf("freezer %s says %q while freezing", dir, s)
		}
		if time.Now().After(deadline) {
			return false, nil
		}
		time.Sleep(wait)
		wait = min(2*wait, time.Millisecond)
	}
}
