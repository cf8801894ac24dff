package client

import (
	"context"
	"net/http"
)

// PoolsService reads the warm pools (GET /pools).
type PoolsService struct{ t *transport }

// Pool describes one warm pool (GET /pools).
type Pool struct {
	TemplateID string `json:"templateID"`
	// Runtime the pool's sandboxes run on (`--pool TEMPLATE@RUNTIME=N`
	// names it; else the template's or the server's default, known once
	// the pool started one); only creates on it claim them.
	Runtime string `json:"runtime,omitempty"`
	// Network pools hold sandboxes with a network (nothing open until a
	// networked create claims one and its policy is applied).
	Network bool `json:"network,omitempty"`
	Min     int  `json:"min"`
	Max     int  `json:"max"`
	Ready   int  `json:"ready"`
	// TTLSeconds: a ready sandbox that waited this long is replaced (0 =
	// never).
	TTLSeconds float64 `json:"ttlSeconds,omitempty"`
	// Hits are creates served from the pool (a claim applies the create's
	// env vars, limits and quota); Misses creates of the template that
	// found it empty; Expired ready sandboxes replaced because they
	// outlived the TTL or their template was rebuilt.
	Hits        int64   `json:"hits"`
	Misses      int64   `json:"misses"`
	Expired     int64   `json:"expired"`
	ClaimP50Ms  float64 `json:"claimP50Ms"`
	LastFailure string  `json:"lastFailure,omitempty"`
}

// List describes the warm pools.
func (s *PoolsService) List(ctx context.Context) ([]Pool, error) {
	var out []Pool
	err := s.t.call(ctx, request{method: http.MethodGet, path: "/pools"}, &out)
	return out, err
}
