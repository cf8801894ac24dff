package client

import (
	"context"
	"net/http"
	"net/url"
)

// APIKeysService creates, lists and revokes API keys (the /api-keys routes).
type APIKeysService struct{ t *transport }

// Create makes a key for a team. The answer's Key is the secret; the
// server shows it only this once.
func (s *APIKeysService) Create(ctx context.Context, in NewAPIKey) (APIKey, error) {
	var k APIKey
	r, err := jsonBody(http.MethodPost, "/api-keys", in)
	if err != nil {
		return k, err
	}
	err = s.t.call(ctx, r, &k)
	return k, err
}

// List lists the keys (without their secrets).
func (s *APIKeysService) List(ctx context.Context) ([]APIKey, error) {
	var out []APIKey
	err := s.t.call(ctx, request{method: http.MethodGet, path: "/api-keys"}, &out)
	return out, err
}

// Revoke revokes a key by its id.
func (s *APIKeysService) Revoke(ctx context.Context, id string) error {
	return s.t.call(ctx, request{method: http.MethodDelete, path: "/api-keys/" + url.PathEscape(id)}, nil)
}
