package session

// Team limits: what one team's sandboxes may hold together (sandboxes
// alive, memory, CPUs, disk quotas), so that one tenant cannot take a
// whole host. Every step that adds to a team's usage — create, fork, a
// warm-pool claim, the resume of a hibernated sandbox, a limit change —
// is admitted under the registry's createMu: the check and the step's
// reservation are one critical section, so two creates cannot both take
// the last slot. A create's reservation is its record (reserveWith); a
// resume's or a limit change's, whose record changes only after slow work,
// is held in pending until that work ends.

import (
	"context"
	"fmt"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
	"github.com/warrenhq/warren/internal/store"
)

// demand is what one step adds to a team's usage.
type demand struct {
	Sandboxes, MemoryBytes, CPUMillis, DiskBytes int64
	// NoQuota: the step adds a sandbox without a disk quota, whose disk
	// no limit can bound.
	NoQuota bool
}

func (d demand) add(e demand) demand {
	return demand{d.Sandboxes + e.Sandboxes, d.MemoryBytes + e.MemoryBytes, d.CPUMillis + e.CPUMillis, d.DiskBytes + e.DiskBytes, d.NoQuota || e.NoQuota}
}

// demandOf is what a new sandbox's record adds.
func demandOf(rec store.Sandbox) demand {
	return demand{Sandboxes: 1, MemoryBytes: rec.MemoryBytes, CPUMillis: rec.CPUMillis, DiskBytes: rec.QuotaBytes, NoQuota: rec.QuotaBytes == 0}
}

// overLimit says which of a team's limits d would pass, given what the
// team holds (u), or nil. Only what d adds is judged: a team already over
// a limit lowered since can still delete, pause or shrink.
func overLimit(l store.TeamLimits, u store.TeamUsage, d demand) error {
	check := func(what string, limit, have, add int64, unit func(int64) string) error {
		if limit == 0 || add <= 0 || have+add <= limit {
			return nil
		}
		return fmt.Errorf("team %s is at its limit of %s %s: it holds %s and this needs %s more; free some first or ask for a higher team limit: %w",
			l.Team, unit(limit), what, unit(have), unit(add), errdefs.ErrResourceExhausted)
	}
	count := func(n int64) string { return fmt.Sprint(n) }
	mib := func(n int64) string { return fmt.Sprintf("%d MiB", n>>20) }
	cpus := func(n int64) string { return fmt.Sprintf("%g CPUs", float64(n)/1000) }
	if err := check("sandboxes alive", l.Sandboxes, u.Sandboxes, d.Sandboxes, count); err != nil {
		return err
	}
	if err := check("memory", l.MemoryBytes, u.MemoryBytes, d.MemoryBytes, mib); err != nil {
		return err
	}
	if err := check("CPU", l.CPUMillis, u.CPUMillis, d.CPUMillis, cpus); err != nil {
		return err
	}
	if l.DiskBytes > 0 && d.NoQuota {
		return fmt.Errorf("team %s has a disk limit of %d MiB, so its sandboxes need a disk quota: give diskMB (this server gives none by default): %w",
			l.Team, l.DiskBytes>>20, errdefs.ErrResourceExhausted)
	}
	return check("disk", l.DiskBytes, u.DiskBytes, d.DiskBytes, mib)
}

// checkTeamLocked refuses d if it would pass one of the team's limits,
// counting the steps still pending. The caller holds createMu.
func (r *registry) checkTeamLocked(ctx context.Context, team string, d demand) error {
	l, err := r.store.GetTeamLimits(ctx, team)
	if err != nil {
		return err
	}
	if l == (store.TeamLimits{Team: team}) {
		return nil // no limits: skip the usage query
	}
	u, err := r.store.GetTeamUsage(ctx, team)
	if err != nil {
		return err
	}
	p := r.teamPending[team]
	u.Sandboxes += p.Sandboxes
	u.MemoryBytes += p.MemoryBytes
	u.CPUMillis += p.CPUMillis
	u.DiskBytes += p.DiskBytes
	return overLimit(l, u, d)
}

// admitTeam admits a step that changes a record only after slow work (a
// resume, a limit change): d is counted as pending until release.
func (r *registry) admitTeam(ctx context.Context, team string, d demand) (release func(), err error) {
	r.createMu.Lock()
	defer r.createMu.Unlock()
	if err := r.checkTeamLocked(ctx, team, d); err != nil {
		return nil, err
	}
	if r.teamPending == nil {
		r.teamPending = map[string]demand{}
	}
	r.teamPending[team] = r.teamPending[team].add(d)
	return func() {
		r.createMu.Lock()
		defer r.createMu.Unlock()
		left := r.teamPending[team].add(demand{-d.Sandboxes, -d.MemoryBytes, -d.CPUMillis, -d.DiskBytes, false})
		if left == (demand{}) {
			delete(r.teamPending, team)
		} else {
			r.teamPending[team] = left
		}
	}, nil
}

// SetTeamLimits replaces a team's limits. Limits below what the team
// holds are accepted: they refuse what would add to it, and take nothing
// away.
func (r *registry) SetTeamLimits(ctx context.Context, l store.TeamLimits) (store.TeamLimits, error) {
	if err := ids.ValidateName("team", l.Team); err != nil {
		return store.TeamLimits{}, err
	}
	l.UpdatedAt = r.cfg.Now().UTC()
	if err := r.store.SetTeamLimits(ctx, l); err != nil {
		return store.TeamLimits{}, err
	}
	return r.store.GetTeamLimits(ctx, l.Team)
}

// TeamUsage returns a team's limits and what its sandboxes hold.
func (r *registry) TeamUsage(ctx context.Context, team string) (store.TeamLimits, store.TeamUsage, error) {
	if err := ids.ValidateName("team", team); err != nil {
		return store.TeamLimits{}, store.TeamUsage{}, err
	}
	l, err := r.store.GetTeamLimits(ctx, team)
	if err != nil {
		return store.TeamLimits{}, store.TeamUsage{}, err
	}
	u, err := r.store.GetTeamUsage(ctx, team)
	if err != nil {
		return store.TeamLimits{}, store.TeamUsage{}, err
	}
	return l, u, nil
}
