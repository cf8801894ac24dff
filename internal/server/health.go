package server

import (
	"net/http"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/metrics"
)

// health answers GET /health without authentication: the daemon's static
// facts, the storage pool's fill level (which sets the status) and how many
// sandboxes run and how many commands. It names no sandbox, except in the
// last errors, which only an admin key sees. It answers 200 whatever the status,
// so that a probe can tell a full pool from a dead daemon.
func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	h := s.deps.Health
	if s.deps.Sessions != nil {
		h.Capabilities = s.capabilities()
	}
	if len(s.deps.Runtimes) > 0 {
		if h.Capabilities == nil {
			h.Capabilities = &client.Capabilities{}
		}
		h.Capabilities.Runtimes = s.deps.Runtimes
	}
	if s.deps.Sessions != nil {
		h.CommandsInFlight = s.daemon.CommandsInFlight()
	}
	if m := s.deps.Metrics; m != nil {
		h.UptimeSeconds = int64(m.Uptime().Seconds())
		h.ErrorsTotal = m.Errors().Total()
		if s.isAdmin(r) {
			for _, e := range m.Errors().Recent() {
				h.LastErrors = append(h.LastErrors, client.HealthError{At: e.At, Op: e.Op, SandboxID: e.Sandbox, Message: e.Message})
			}
		}
		h.Sandboxes = m.Sampler.Live()
		if p, err := m.Pool(); err == nil {
			h.Pool = &client.PoolUsage{UsedBytes: p.UsedBytes, TotalBytes: p.TotalBytes, UsedPct: p.UsedPct}
			h.Status = metrics.PoolStatus(p.UsedPct)
		}
	}
	writeJSON(w, http.StatusOK, h)
}

// isAdmin says whether the request carries a valid admin key. An absent or
// bad key is no error here: health answers everyone.
func (s *Server) isAdmin(r *http.Request) bool {
	key := apiKeyOf(r)
	if key == "" || s.deps.Keys == nil {
		return false
	}
	k, err := s.authz.authenticate(r.Context(), key)
	return err == nil && k.Team == AdminTeam
}
