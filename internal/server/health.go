package server

import (
	"net/http"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/metrics"
)

// healthRoutes serve the daemon's health and its warm pools' stats.
type healthRoutes struct {
	static   client.Health
	runtimes []client.RuntimeInfo
	daemon   Daemon
	metrics  *metrics.Metrics
	authz    *authCache
}

// health answers GET /health without authentication: the daemon's static
// facts, the storage pool's fill level (which sets the status) and how many
// sandboxes run and how many commands. It names no sandbox, except in the
// last errors, which only an admin key sees. It answers 200 whatever the status,
// so that a probe can tell a full pool from a dead daemon.
func (s *healthRoutes) health(w http.ResponseWriter, r *http.Request) {
	h := s.static
	if s.daemon != nil {
		h.Capabilities = s.capabilities()
	}
	if len(s.runtimes) > 0 {
		if h.Capabilities == nil {
			h.Capabilities = &client.Capabilities{}
		}
		h.Capabilities.Runtimes = s.runtimes
	}
	if s.daemon != nil {
		h.CommandsInFlight = s.daemon.CommandsInFlight()
	}
	if m := s.metrics; m != nil {
		h.UptimeSeconds = int64(m.Uptime().Seconds())
		h.ErrorsTotal = m.Errors().Total()
		if s.authz.isAdmin(r) {
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

// capabilities is what GET /health says of the optional features.
func (s *healthRoutes) capabilities() *client.Capabilities {
	c := &client.Capabilities{Network: true}
	if err := s.daemon.NetworkAvailable(); err != nil {
		c.Network, c.NetworkError = false, err.Error()
	}
	return c
}
