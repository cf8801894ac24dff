package client

import (
	"context"
	"io"
	"net/http"
)

// MetaService reads the daemon's health and metrics (the API's meta routes).
type MetaService struct{ t *transport }

// maxPrometheusBody bounds the /metrics answer read by MetaService.Metrics.
const maxPrometheusBody = 16 << 20

// Health reports the daemon's status. It needs no API key; with an admin
// key it also lists the daemon's last errors.
func (s *MetaService) Health(ctx context.Context) (Health, error) {
	var h Health
	err := s.t.call(ctx, request{method: http.MethodGet, path: "/health"}, &h)
	return h, err
}

// Metrics returns the daemon's GET /metrics page (Prometheus text
// format). It needs an admin key unless the daemon runs with
// --metrics-public.
func (s *MetaService) Metrics(ctx context.Context) (string, error) {
	resp, err := s.t.send(ctx, request{method: http.MethodGet, path: "/metrics"})
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxPrometheusBody))
	return string(b), err
}

// maxCACertBody bounds the CA certificate MetaService.TLSCA reads.
const maxCACertBody = 64 << 10

// TLSCA returns the certificate (PEM) of the CA the daemon's TLS listener
// mints its certificates with (`warren serve --tls-ca auto`), for clients
// to trust. It needs no API key. A daemon without a CA of its own answers
// 404.
func (s *MetaService) TLSCA(ctx context.Context) ([]byte, error) {
	resp, err := s.t.send(ctx, request{method: http.MethodGet, path: "/tls/ca.pem"})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(io.LimitReader(resp.Body, maxCACertBody))
}
