package client

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// maxPrometheusBody bounds the /metrics answer read by PrometheusMetrics.
const maxPrometheusBody = 16 << 20

// SandboxMetrics returns a sandbox's resource samples taken between start
// and end (whole seconds, inclusive; a zero time = no bound), oldest first.
func (c *Client) SandboxMetrics(ctx context.Context, id string, start, end time.Time) ([]SandboxMetric, error) {
	q := url.Values{}
	if !start.IsZero() {
		q.Set("start", strconv.FormatInt(start.Unix(), 10))
	}
	if !end.IsZero() {
		q.Set("end", strconv.FormatInt(end.Unix(), 10))
	}
	var out []SandboxMetric
	err := c.call(ctx, request{method: http.MethodGet, path: sandboxPath(id, "/metrics"), query: q}, &out)
	return out, err
}

// PrometheusMetrics returns the daemon's GET /metrics page (Prometheus text
// format). It needs an admin key unless the daemon runs with
// --metrics-public.
func (c *Client) PrometheusMetrics(ctx context.Context) (string, error) {
	resp, err := c.send(ctx, request{method: http.MethodGet, path: "/metrics"})
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxPrometheusBody))
	return string(b), err
}
