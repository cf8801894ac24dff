package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Metrics returns a sandbox's resource samples taken between start
// and end (whole seconds, inclusive; a zero time = no bound), oldest first.
func (s *SandboxesService) Metrics(ctx context.Context, id string, start, end time.Time) ([]SandboxMetric, error) {
	q := url.Values{}
	if !start.IsZero() {
		q.Set("start", strconv.FormatInt(start.Unix(), 10))
	}
	if !end.IsZero() {
		q.Set("end", strconv.FormatInt(end.Unix(), 10))
	}
	var out []SandboxMetric
	err := s.t.call(ctx, request{method: http.MethodGet, path: sandboxPath(id, "/metrics"), query: q}, &out)
	return out, err
}
