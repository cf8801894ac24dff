package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/template"
)

// historyRollbackEvery spaces the rollbacks of runRollbackInHistory: one
// after every third turn, so 100 over a 300-turn history. Before every
// historyReadEvery-th of them the sandbox reads its whole tree's metadata
// (`du`, as a build or a grep over the workspace would), so that the old
// root the rollback leaves has every inode cached: the drop the design
// notes measured at 0.3–1 s.
const (
	historyRollbackEvery = 3
	historyReadEvery     = 5
	// historyBlock is how many turns run in one mode before the other.
	historyBlock = 30
)

// runRollbackInHistory goes on with the agent loop the way an agent that
// backs out of its mistakes does: opts.Turns more turns, and after every
// third a rollback to the turn before the last, then an exec. Each
// rollback leaves an old root whose blocks the sandbox's snapshots share:
// the drop that used to put a one-second rollback in every ten
// (RollbackInHistory's p90/p99).
//
// The baseline is measured in the same run, when the storage can switch:
// as many turns and rollbacks again with the old roots deleted where they
// are (in the directory the next rollback's copy is made in), as before
// DeleteAside. The two alternate in blocks of historyBlock turns, so that
// the machine's other load and the history's growth fall on both alike.
func (s *snapSuite) runRollbackInHistory(ctx context.Context) error {
	next := s.opts.Turns + scatteredTurns(s.opts.Turns) + thinkingTurns(s.opts.Turns) + 1
	sw, canSwitch := s.h.d.Storage.(interface{ SetDeleteInPlace(bool) })
	block := min(historyBlock, s.opts.Turns)
	var aside, inPlace []time.Duration
	for done := 0; done < s.opts.Turns; done += block {
		n := min(block, s.opts.Turns-done)
		for _, baseline := range []bool{false, true} {
			if baseline && !canSwitch {
				continue
			}
			if canSwitch {
				sw.SetDeleteInPlace(baseline)
			}
			took, err := s.rollbacksInHistory(ctx, next, n)
			if err != nil {
				return err
			}
			next += n
			if baseline {
				inPlace = append(inPlace, took...)
			} else {
				aside = append(aside, took...)
			}
		}
	}
	if canSwitch {
		sw.SetDeleteInPlace(false)
	}
	s.rep.RollbackInHistory = Summarise(aside)
	s.rep.RollbackInHistoryInPlace = Summarise(inPlace)
	return nil
}

// rollbacksInHistory takes n turns numbered from first, with a rollback
// after every third, and returns the rollbacks' times.
func (s *snapSuite) rollbacksInHistory(ctx context.Context, first, n int) ([]time.Duration, error) {
	c := s.h.c
	var history []client.Snapshot
	var took []time.Duration
	for i := range n {
		t := first + i
		res, err := c.Commands.ExecWait(ctx, s.id, client.ExecRequest{Command: turnCommand(s.l, t, false)})
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("exited %d: %s", res.ExitCode, res.Stderr)
		}
		if err != nil {
			return nil, fmt.Errorf("turn %d: write files: %w", t, err)
		}
		snap, err := c.Snapshots.Turn(ctx, s.id)
		if err != nil {
			return nil, fmt.Errorf("turn %d: %w", t, err)
		}
		history = append(history, snap)
		if (i+1)%historyRollbackEvery != 0 || len(history) < 2 {
			continue
		}
		if n := (i + 1) / historyRollbackEvery; n%historyReadEvery == 0 {
			res, err := c.Commands.ExecWait(ctx, s.id, client.ExecRequest{Command: "du -s " + template.Workspace + " >/dev/null"})
			if err == nil && res.ExitCode != 0 {
				err = fmt.Errorf("exited %d: %s", res.ExitCode, res.Stderr)
			}
			if err != nil {
				return nil, fmt.Errorf("read the tree: %w", err)
			}
		}
		to := history[len(history)-2]
		start := time.Now()
		if _, err := c.Snapshots.Rollback(ctx, s.id, client.RollbackRequest{SnapshotID: to.SnapshotID}); err != nil {
			return nil, fmt.Errorf("rollback to %s: %w", to.Name, err)
		}
		took = append(took, time.Since(start))
		res, err = c.Commands.ExecWait(ctx, s.id, client.ExecRequest{Cmd: []string{"true"}})
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("exited %d: %s", res.ExitCode, res.Error)
		}
		if err != nil {
			return nil, fmt.Errorf("exec after rollback to %s: %w", to.Name, err)
		}
	}
	return took, nil
}
