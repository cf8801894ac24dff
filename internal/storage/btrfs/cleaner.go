package btrfs

import (
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// After a delete, btrfs's cleaner thread drops the volume's tree, but it
// sleeps until the next commit interval (30 s by default) unless woken, and
// the deleted volumes left in the pool meanwhile make every snapshot of
// their lineage dearer. Only BTRFS_IOC_SYNC wakes it from user space, and
// that ioctl commits too. So a delete asks for one wake a little later,
// shared by every delete until then (the archiver drops its volumes in
// batches).
//
// Why not wake it from the write-back before a snapshot, as warren did
// before: that put the cleaner's work (and, since kernel 6.10, the commit
// it makes after each volume it drops, to remove the volume's quota group)
// right where the snapshot's freeze follows. Woken after the archiver's
// drops, which follow a turn, it works while the sandbox runs its next
// command. 1,000-turn bench, four interleaved pairs (two with an earlier
// form of this): frozen per turn 3.9–4.4 → 2.3–2.9 ms p50, the turn over
// the raw btrfs floor of the same run 1.01–1.10 → 0.84–0.97.

// cleanerWakeDelay gathers the deletes of one batch into one wake.
const cleanerWakeDelay = 20 * time.Millisecond

// cleanerWaker wakes the cleaner of the filesystem holding dir once,
// cleanerWakeDelay after the first request since the last wake.
type cleanerWaker struct {
	mu      sync.Mutex // held while waking, so that stop waits for it
	pending bool
	stopped bool
	wake    func() // for tests; nil: reclaimDeleted on dir
}

// soon asks for a wake of dir's cleaner.
func (c *cleanerWaker) soon(dir string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending || c.stopped {
		return
	}
	c.pending = true
	time.AfterFunc(cleanerWakeDelay, func() { c.run(dir) })
}

func (c *cleanerWaker) run(dir string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending = false
	if c.stopped {
		return
	}
	if c.wake != nil {
		c.wake()
		return
	}
	f, err := os.OpenFile(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer f.Close()
	// A failure costs only time: the cleaner wakes at the next commit
	// interval all the same.
	_ = reclaimDeleted(int(f.Fd()))
}

// stop cancels wakes not yet made and waits for one under way (it holds an
// open file on the pool, which would keep an unmount from succeeding).
func (c *cleanerWaker) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped = true
}
