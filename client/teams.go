package client

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// TeamsService sets a team's limits and reads its usage (the /teams
// routes).
type TeamsService struct{ t *transport }

// TeamLimits caps what one team's sandboxes hold together; 0 (or absent)
// in a field is no limit. A PUT sets every field: one left out becomes 0.
type TeamLimits struct {
	Team string `json:"team,omitempty"` // in answers
	// Sandboxes alive at once (running, paused or being created).
	Sandboxes int64 `json:"sandboxes,omitempty"`
	// MemoryMB and CPUCount add up the limits of the sandboxes alive.
	MemoryMB int64   `json:"memoryMB,omitempty"`
	CPUCount float64 `json:"cpuCount,omitempty"`
	// DiskMB adds up the disk quotas of every sandbox not deleted
	// (hibernated and stopped ones hold their files). With a disk limit,
	// a sandbox without a disk quota is refused.
	DiskMB    int64      `json:"diskMB,omitempty"`
	UpdatedAt *time.Time `json:"updatedAt,omitempty"`
}

// TeamUsage is the answer of GET /teams/{team}/usage: what the team's
// sandboxes hold, counted as its limits count, and the limits.
type TeamUsage struct {
	Team      string     `json:"team"`
	Sandboxes int64      `json:"sandboxes"`
	MemoryMB  int64      `json:"memoryMB"`
	CPUCount  float64    `json:"cpuCount"`
	DiskMB    int64      `json:"diskMB"`
	Limits    TeamLimits `json:"limits"`
	// SandboxesWithoutDiskQuota have no disk quota: their disk is not
	// bounded and not in DiskMB.
	SandboxesWithoutDiskQuota int64 `json:"sandboxesWithoutDiskQuota"`
}

// SetLimits replaces a team's limits (admin key only).
func (s *TeamsService) SetLimits(ctx context.Context, team string, l TeamLimits) (TeamLimits, error) {
	var out TeamLimits
	l.Team, l.UpdatedAt = "", nil
	r, err := jsonBody(http.MethodPut, "/teams/"+url.PathEscape(team)+"/limits", l)
	if err != nil {
		return out, err
	}
	err = s.t.call(ctx, r, &out)
	return out, err
}

// Usage reads a team's usage and limits (the admin key, or a key of that
// team).
func (s *TeamsService) Usage(ctx context.Context, team string) (TeamUsage, error) {
	var out TeamUsage
	err := s.t.call(ctx, request{method: http.MethodGet, path: "/teams/" + url.PathEscape(team) + "/usage"}, &out)
	return out, err
}
