package server

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/store"
)

// Teams is what the team routes need (teamRoutes).
type Teams interface {
	SetTeamLimits(ctx context.Context, l store.TeamLimits) (store.TeamLimits, error)
	TeamUsage(ctx context.Context, team string) (store.TeamLimits, store.TeamUsage, error)
}

// teamRoutes serve a team's limits and usage.
type teamRoutes struct {
	teams Teams
}

// maxTeamLimit bounds each limit (in its unit) so that the MiB → bytes
// shifts cannot overflow: 2^40 MiB is an exbibyte.
const maxTeamLimit = 1 << 40

// setLimits serves PUT /teams/{team}/limits (admin only): the body is
// the whole set of limits, a field left out being no limit.
func (s *teamRoutes) setLimits(w http.ResponseWriter, r *http.Request) {
	// Strict, unlike the E2B-shaped bodies: a misspelt field would
	// otherwise lift a limit without a word.
	var body client.TeamLimits
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxJSONBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		writeError(w, r, fmt.Errorf("the body must be a JSON object of sandboxes, memoryMB, cpuCount and diskMB ({} lifts every limit): %v: %w", err, errdefs.ErrInvalid))
		return
	}
	for _, l := range []struct {
		name  string
		value float64
	}{{"sandboxes", float64(body.Sandboxes)}, {"memoryMB", float64(body.MemoryMB)}, {"cpuCount", body.CPUCount}, {"diskMB", float64(body.DiskMB)}} {
		if l.value < 0 || l.value > maxTeamLimit || math.IsNaN(l.value) {
			writeError(w, r, fmt.Errorf("%s %v: want 0 (no limit) or a positive value up to %d: %w", l.name, l.value, int64(maxTeamLimit), errdefs.ErrInvalid))
			return
		}
	}
	if body.Team != "" && body.Team != r.PathValue("team") {
		writeError(w, r, fmt.Errorf("the body names team %q, the path %q: %w", body.Team, r.PathValue("team"), errdefs.ErrInvalid))
		return
	}
	l, err := s.teams.SetTeamLimits(r.Context(), store.TeamLimits{Team: r.PathValue("team"),
		Sandboxes: body.Sandboxes, MemoryBytes: body.MemoryMB << 20, CPUMillis: int64(math.Round(body.CPUCount * 1000)), DiskBytes: body.DiskMB << 20})
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, limitsOf(l))
}

// usage serves GET /teams/{team}/usage: the admin key reads any team's,
// another key its own team's only.
func (s *teamRoutes) usage(w http.ResponseWriter, r *http.Request) {
	team := r.PathValue("team")
	if caller := teamOf(r); caller != AdminTeam && caller != team {
		writeError(w, r, fmt.Errorf("a key of team %s reads only its own team's usage: %w", caller, errdefs.ErrPermissionDenied))
		return
	}
	l, u, err := s.teams.TeamUsage(r.Context(), team)
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, client.TeamUsage{
		Team: team, Sandboxes: u.Sandboxes, MemoryMB: u.MemoryBytes >> 20, CPUCount: float64(u.CPUMillis) / 1000,
		DiskMB: u.DiskBytes >> 20, Limits: limitsOf(l), SandboxesWithoutDiskQuota: u.Unquotaed,
	})
}

func limitsOf(l store.TeamLimits) client.TeamLimits {
	out := client.TeamLimits{Team: l.Team, Sandboxes: l.Sandboxes, MemoryMB: l.MemoryBytes >> 20, CPUCount: float64(l.CPUMillis) / 1000, DiskMB: l.DiskBytes >> 20}
	if !l.UpdatedAt.IsZero() {
		t := l.UpdatedAt
		out.UpdatedAt = &t
	}
	return out
}
