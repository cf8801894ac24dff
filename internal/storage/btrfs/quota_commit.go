package btrfs

import (
	"fmt"
	"sync"
)

// Group commit of the quota group table. Every create sets its group's
// limit and every delete removes its group, and each change is durable
// before the call returns: a crash must not forget a group whose qgroup
// holds a sandbox's volume (its name would then find no qgroup, and its
// qgroup would never be removed). A durable write of the table (a new
// file, fsync, rename, fsync of the directory) costs ~1 ms of CPU, most of
// it btrfs's log commit in the kernel. With many creates and deletes at
// once, the changes queue here instead: one caller at a time (the leader)
// takes every change queued so far, applies them all under the table's
// lock, writes the table once, and only then returns to each caller,
// which therefore still returns only once its change is on disk. Changes
// that arrive while that write is under way make the next batch, led by
// the first of them.

// tableOp is one change to the table, made with its lock held. It reports
// whether it changed what the file holds (even if it then failed:
// what it changed is saved) and, for a save that fails, what undoes the
// change's effects outside the table (a qgroup it made); undo may be nil.
type tableOp func(t *groupTable) (changed bool, undo func(), err error)

// tableCommits is the queue of changes waiting for a write. The zero value
// is ready to use.
type tableCommits struct {
	mu    sync.Mutex
	queue []*queuedOp
	busy  bool // a leader is applying and writing a batch
	// batches counts the batches written (tests).
	batches int
}

// queuedOp is one caller's change. wake receives true when the caller is
// to lead the next batch, false when its change was applied (err is then
// its result).
type queuedOp struct {
	op   tableOp
	wake chan bool
	err  error
}

// update applies op to the table and returns once its change is durable:
// in a batch with the changes of other callers made at the same time.
func (g *quotaGroups) update(op tableOp) error {
	c := &g.commits
	me := &queuedOp{op: op, wake: make(chan bool, 1)}
	c.mu.Lock()
	c.queue = append(c.queue, me)
	lead := !c.busy
	c.busy = true
	c.mu.Unlock()
	if !lead && !<-me.wake {
		return me.err
	}
	c.mu.Lock()
	batch := c.queue
	c.queue = nil
	c.batches++
	c.mu.Unlock()

	g.applyBatch(batch)

	c.mu.Lock()
	if len(c.queue) > 0 {
		c.queue[0].wake <- true // the oldest waiter leads the next batch
	} else {
		c.busy = false
	}
	c.mu.Unlock()
	for _, q := range batch {
		if q != me {
			q.wake <- false
		}
	}
	return me.err
}

// applyBatch applies every change of batch under one lock of the table and
// saves the table once if any changed it. A failed save fails every change
// that needed it, and undoes what they did outside the table.
func (g *quotaGroups) applyBatch(batch []*queuedOp) {
	t, err := g.openGroupTable()
	if err != nil {
		for _, q := range batch {
			q.err = fmt.Errorf("quota group table: %w", err)
		}
		return
	}
	defer t.close()
	var changed []*queuedOp
	var undos []func()
	for _, q := range batch {
		dirty, undo, err := q.op(t)
		q.err = err
		if dirty {
			changed = append(changed, q)
			undos = append(undos, undo)
		}
	}
	if len(changed) == 0 {
		return
	}
	if err := t.save(); err != nil {
		for i, q := range changed {
			if undos[i] != nil {
				undos[i]()
			}
			q.err = err
		}
	}
}
