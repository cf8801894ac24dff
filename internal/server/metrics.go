package server

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/metrics"
)

// observe records a finished request's latency under the route pattern that
// matched it (ServeMux sets r.Pattern), so sandbox ids never become labels.
func (s *Server) observe(r *http.Request, status int, d time.Duration) {
	if s.metrics != nil {
		s.metrics.ObserveRequest(r.Pattern, status, d)
	}
}

// metricsRoutes serve the daemon's Prometheus page and a sandbox's samples.
type metricsRoutes struct {
	records Records
	metrics *metrics.Metrics
	// public serves /metrics without a key (--metrics-public).
	public bool
	authz  *authCache
}

// sandboxMetrics answers GET /sandboxes/{id}/metrics?start=&end= (unix
// seconds, inclusive) with the team's sandbox's samples, E2B's shape.
func (s *metricsRoutes) sandboxMetrics(w http.ResponseWriter, r *http.Request) {
	rec, err := s.records.Get(r.Context(), teamOf(r), r.PathValue("id"))
	if err != nil {
		writeError(w, r, err)
		return
	}
	start, err := unixParam(r, "start")
	if err != nil {
		writeError(w, r, err)
		return
	}
	end, err := unixParam(r, "end")
	if err != nil {
		writeError(w, r, err)
		return
	}
	if !end.IsZero() {
		end = end.Add(time.Second - 1) // the whole end second
	}
	out := []client.SandboxMetric{}
	if s.metrics != nil {
		for _, smp := range s.metrics.Sampler.Range(rec.ID, start, end) {
			out = append(out, metricOf(smp))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func metricOf(s metrics.Sample) client.SandboxMetric {
	return client.SandboxMetric{
		Timestamp:     s.At.UTC(),
		TimestampUnix: s.At.Unix(),
		CPUCount:      s.CPUCount,
		CPUUsedPct:    s.CPUUsedPct,
		MemUsed:       s.MemUsed,
		MemTotal:      s.MemTotal,
		DiskUsed:      s.DiskUsed,
		DiskTotal:     s.DiskTotal,
		Pids:          s.Pids,
		PidsLimit:     s.PidsLimit,
	}
}

// unixParam reads an optional query parameter of unix seconds (zero time
// when absent).
func unixParam(r *http.Request, name string) (time.Time, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return time.Time{}, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return time.Time{}, fmt.Errorf("%s=%q: want unix seconds: %w", name, v, errdefs.ErrInvalid)
	}
	return time.Unix(n, 0), nil
}

// prometheus answers GET /metrics. It needs an admin key unless the daemon
// runs with --metrics-public; the public page leaves out the per-sandbox
// series, whose labels are sandbox ids.
func (s *metricsRoutes) prometheus(w http.ResponseWriter, r *http.Request) {
	if s.public {
		s.writePrometheus(false)(w, r)
		return
	}
	s.authz.requireKey(adminOnly(s.writePrometheus(true))).ServeHTTP(w, r)
}

func (s *metricsRoutes) writePrometheus(withSandboxes bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.metrics == nil {
			writeError(w, r, fmt.Errorf("metrics are not enabled on this server: %w", errdefs.ErrUnavailable))
			return
		}
		s.metrics.Handler(withSandboxes).ServeHTTP(w, r)
	}
}
