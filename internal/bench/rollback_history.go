package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/warrenhq/warren/client"
)

// historyRollbackEvery spaces the rollbacks of runRollbackInHistory: one
// after every third turn, so 100 over a 300-turn history.
const historyRollbackEvery = 3

// runRollbackInHistory goes on with the agent loop the way an agent that
// backs out of its mistakes does: opts.Turns more turns, and after every
// third a rollback to the turn before the last, then an exec. Each
// rollback leaves an old root whose inodes the sandbox has just had
// cached and whose blocks its snapshots share: the drop that used to put
// a one-second rollback in every ten (RollbackInHistory's p90/p99).
//
// The baseline follows in the same run, when the storage can: as many
// turns and rollbacks again with the old roots deleted where they are (in
// the directory the next rollback's copy is made in), as before
// DeleteAside.
func (s *snapSuite) runRollbackInHistory(ctx context.Context) error {
	first := s.opts.Turns + scatteredTurns(s.opts.Turns) + thinkingTurns(s.opts.Turns) + 1
	took, err := s.rollbacksInHistory(ctx, first)
	if err != nil {
		return err
	}
	s.rep.RollbackInHistory = Summarise(took)
	sw, ok := s.h.d.Storage.(interface{ SetDeleteInPlace(bool) })
	if !ok {
		return nil
	}
	// The drops the run above left waiting go first (they wait for 2 s of
	// quiet).
	time.Sleep(3 * time.Second)
	sw.SetDeleteInPlace(true)
	defer sw.SetDeleteInPlace(false)
	took, err = s.rollbacksInHistory(ctx, first+s.opts.Turns)
	if err != nil {
		return fmt.Errorf("baseline: %w", err)
	}
	s.rep.RollbackInHistoryInPlace = Summarise(took)
	return nil
}

// rollbacksInHistory takes opts.Turns turns numbered from first, with a
// rollback after every third, and returns the rollbacks' times.
func (s *snapSuite) rollbacksInHistory(ctx context.Context, first int) ([]time.Duration, error) {
	c := s.h.c
	var history []client.Snapshot
	var took []time.Duration
	for i := range s.opts.Turns {
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
