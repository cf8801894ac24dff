package client

import (
	"context"
	"net/http"
	"net/url"
)

// ListTemplates lists the templates sandboxes can start from.
func (c *Client) ListTemplates(ctx context.Context) ([]Template, error) {
	var out []Template
	err := c.call(ctx, request{method: http.MethodGet, path: "/templates"}, &out)
	return out, err
}

// DeleteTemplate removes a template.
func (c *Client) DeleteTemplate(ctx context.Context, name string) error {
	return c.call(ctx, request{method: http.MethodDelete, path: "/templates/" + url.PathEscape(name)}, nil)
}
