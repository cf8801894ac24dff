package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
)

// TeamLimits caps what one team's sandboxes may hold together; 0 in a
// field is no limit. A team without a row has no limits.
type TeamLimits struct {
	Team        string
	Sandboxes   int64 // alive at once (creating, running, paused)
	MemoryBytes int64 // their memory limits added up
	CPUMillis   int64 // their CPU limits added up
	DiskBytes   int64 // the disk quotas of every sandbox not destroyed, added up
	UpdatedAt   time.Time
}

// TeamUsage is what a team's sandboxes hold, counted as TeamLimits caps
// it.
type TeamUsage struct {
	Sandboxes, MemoryBytes, CPUMillis, DiskBytes int64
	// Unquotaed counts the sandboxes not destroyed that have no disk
	// quota: their disk is unbounded.
	Unquotaed int64
}

// teamTable holds the teams' limits.
type teamTable struct{ *conns }

// SetTeamLimits stores a team's limits, replacing any it had.
func (s *teamTable) SetTeamLimits(ctx context.Context, l TeamLimits) error {
	if err := ids.ValidateName("team", l.Team); err != nil {
		return err
	}
	if l.Sandboxes < 0 || l.MemoryBytes < 0 || l.CPUMillis < 0 || l.DiskBytes < 0 {
		return fmt.Errorf("team %s: limits must not be negative (0 means no limit): %w", l.Team, errdefs.ErrInvalid)
	}
	_, err := s.w.ExecContext(ctx, `INSERT INTO team_limits (team, sandboxes, memory_bytes, cpu_millis, disk_bytes, updated_at)
		VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (team) DO UPDATE SET sandboxes = excluded.sandboxes, memory_bytes = excluded.memory_bytes,
			cpu_millis = excluded.cpu_millis, disk_bytes = excluded.disk_bytes, updated_at = excluded.updated_at`,
		l.Team, l.Sandboxes, l.MemoryBytes, l.CPUMillis, l.DiskBytes, toNanos(l.UpdatedAt))
	if err != nil {
		return fmt.Errorf("set limits of team %s: %w", l.Team, dbErr(err))
	}
	return nil
}

// GetTeamLimits returns a team's limits; a team without any gets a zero
// TeamLimits (no limit) with its name.
func (s *teamTable) GetTeamLimits(ctx context.Context, team string) (TeamLimits, error) {
	l := TeamLimits{Team: team}
	var updated int64
	err := s.r.QueryRowContext(ctx, `SELECT sandboxes, memory_bytes, cpu_millis, disk_bytes, updated_at
		FROM team_limits WHERE team = ?`, team).Scan(&l.Sandboxes, &l.MemoryBytes, &l.CPUMillis, &l.DiskBytes, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return l, nil
	}
	if err != nil {
		return TeamLimits{}, fmt.Errorf("limits of team %s: %w", team, dbErr(err))
	}
	l.UpdatedAt = fromNanos(updated)
	return l, nil
}

// GetTeamUsage adds up what a team's sandboxes hold: alive ones count
// for sandboxes, memory and CPUs, and every one not destroyed for disk
// (a hibernated or stopped sandbox still holds its files).
func (s *teamTable) GetTeamUsage(ctx context.Context, team string) (TeamUsage, error) {
	var u TeamUsage
	err := s.r.QueryRowContext(ctx, `SELECT
			count(*) FILTER (WHERE state IN (?, ?, ?)),
			coalesce(sum(memory_bytes) FILTER (WHERE state IN (?, ?, ?)), 0),
			coalesce(sum(cpu_millis) FILTER (WHERE state IN (?, ?, ?)), 0),
			coalesce(sum(quota_bytes), 0),
			count(*) FILTER (WHERE quota_bytes = 0)
		FROM sandboxes WHERE team = ? AND state != ?`,
		StateCreating, StateRunning, StatePaused,
		StateCreating, StateRunning, StatePaused,
		StateCreating, StateRunning, StatePaused,
		team, StateDestroyed).Scan(&u.Sandboxes, &u.MemoryBytes, &u.CPUMillis, &u.DiskBytes, &u.Unquotaed)
	if err != nil {
		return TeamUsage{}, fmt.Errorf("usage of team %s: %w", team, dbErr(err))
	}
	return u, nil
}
