package client

import (
	"context"
	"net/http"
	"net/url"
)

// CreateAPIKey makes a key for a team. The answer's Key is the secret; the
// server shows it only this once.
func (c *Client) CreateAPIKey(ctx context.Context, in NewAPIKey) (APIKey, error) {
	var k APIKey
	r, err := jsonBody(http.MethodPost, "/api-keys", in)
	if err != nil {
		return k, err
	}
	err = c.call(ctx, r, &k)
	return k, err
}

// ListAPIKeys lists the keys (without their secrets).
func (c *Client) ListAPIKeys(ctx context.Context) ([]APIKey, error) {
	var out []APIKey
	err := c.call(ctx, request{method: http.MethodGet, path: "/api-keys"}, &out)
	return out, err
}

// RevokeAPIKey revokes a key by its id.
func (c *Client) RevokeAPIKey(ctx context.Context, id string) error {
	return c.call(ctx, request{method: http.MethodDelete, path: "/api-keys/" + url.PathEscape(id)}, nil)
}
