package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/warrenhq/warren/client"
)

// runRollback times rollbacks to recent turns (in the pool: an agent
// undoing its last turns), then to archived turns (restored first), each
// followed by a (separately timed) exec.
func (s *snapSuite) runRollback(ctx context.Context) error {
	n := len(s.turns)
	w := min(n, s.inPool(s.laterTurns()))
	var recent, archived []int
	for i := range 15 {
		recent = append(recent, n-2-i%max(1, w-1))
	}
	if w < n {
		for i := range 6 {
			archived = append(archived, rollbackTarget(n-w, i))
		}
	}
	var err error
	if s.rep.Rollback, s.rep.ExecAfterRollback, err = s.rollbacks(ctx, recent); err != nil {
		return err
	}
	s.rep.RollbackArchived, _, err = s.rollbacks(ctx, archived)
	return err
}

// rollbacks rolls the sandbox back to each of the turns (indexes into
// s.turns), after an untimed warm-up to the first.
func (s *snapSuite) rollbacks(ctx context.Context, turns []int) (rollback, exec Stats, err error) {
	if len(turns) == 0 {
		return Stats{}, Stats{}, nil
	}
	c := s.h.c
	var took, execs []time.Duration
	for i := -1; i < len(turns); i++ {
		snap := s.turns[max(0, turns[max(i, 0)])]
		start := time.Now()
		if _, err := c.Snapshots.Rollback(ctx, s.id, client.RollbackRequest{SnapshotID: snap.SnapshotID}); err != nil {
			return Stats{}, Stats{}, fmt.Errorf("rollback to %s: %w", snap.Name, err)
		}
		elapsed := time.Since(start)
		start = time.Now()
		res, err := c.Commands.ExecWait(ctx, s.id, client.ExecRequest{Cmd: []string{"true"}})
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("exited %d: %s", res.ExitCode, res.Error)
		}
		if err != nil {
			return Stats{}, Stats{}, fmt.Errorf("exec after rollback to %s: %w", snap.Name, err)
		}
		if i >= 0 {
			took = append(took, elapsed)
			execs = append(execs, time.Since(start))
		}
	}
	return Summarise(took), Summarise(execs), nil
}

// inPool is how many of the newest turns in s.turns are still in the pool
// once since more turns have been taken after them: the daemon keeps its
// newest ArchiveAfter turns there (all of them when it does not archive).
func (s *snapSuite) inPool(since int) int {
	if s.h.cfg.ArchiveAfter <= 0 {
		return len(s.turns)
	}
	return max(2, s.h.cfg.ArchiveAfter-since)
}

// laterTurns is how many turns the thinking and scattered phases take
// after the last of s.turns.
func (s *snapSuite) laterTurns() int {
	return scatteredTurns(s.opts.Turns) + thinkingTurns(s.opts.Turns)
}

// rollbackTarget is the index of the turn the i-th rollback goes to:
// alternately about half-way and a quarter of the way through n turns,
// stepping back by one each time.
func rollbackTarget(n, i int) int {
	base := n / 2
	if i%2 == 1 {
		base = n / 4
	}
	return max(base-i/2, 0)
}
