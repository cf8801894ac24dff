package server

import (
	"net/http"

	"github.com/warrenhq/warren/client"
)

func (s *healthRoutes) listPools(w http.ResponseWriter, r *http.Request) {
	stats := s.daemon.PoolStats()
	out := make([]client.Pool, 0, len(stats))
	for _, p := range stats {
		out = append(out, client.Pool{
			TemplateID:  p.Template,
			Runtime:     p.Runtime,
			Network:     p.Network,
			Min:         p.Min,
			Max:         p.Max,
			Ready:       p.Ready,
			Hits:        p.Hits,
			Misses:      p.Misses,
			Expired:     p.Expired,
			TTLSeconds:  p.TTL.Seconds(),
			ClaimP50Ms:  float64(p.ClaimP50.Microseconds()) / 1000,
			LastFailure: p.LastFailure,
		})
	}
	writeJSON(w, http.StatusOK, out)
}
