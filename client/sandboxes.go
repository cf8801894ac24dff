package client

import (
	"context"
	"net/http"
	"net/url"
	"sort"
	"strconv"
)

// Health reports the daemon's status. It needs no API key; with an admin
// key it also lists the daemon's last errors.
func (c *Client) Health(ctx context.Context) (Health, error) {
	var h Health
	err := c.call(ctx, request{method: http.MethodGet, path: "/health"}, &h)
	return h, err
}

// CreateSandbox starts a sandbox.
func (c *Client) CreateSandbox(ctx context.Context, in NewSandbox) (Sandbox, error) {
	var s Sandbox
	r, err := jsonBody(http.MethodPost, "/sandboxes", in)
	if err != nil {
		return s, err
	}
	err = c.call(ctx, r, &s)
	return s, err
}

// GetSandbox describes one sandbox.
func (c *Client) GetSandbox(ctx context.Context, id string) (SandboxDetail, error) {
	var s SandboxDetail
	err := c.call(ctx, request{method: http.MethodGet, path: sandboxPath(id, "")}, &s)
	return s, err
}

// DeleteSandbox kills a sandbox and removes it.
func (c *Client) DeleteSandbox(ctx context.Context, id string) error {
	return c.call(ctx, request{method: http.MethodDelete, path: sandboxPath(id, "")}, nil)
}

// ListOptions filter and page GET /v2/sandboxes.
type ListOptions struct {
	// Metadata keeps the sandboxes whose metadata holds every pair.
	Metadata map[string]string
	// States keeps the sandboxes in one of these states ("running", "paused").
	States []string
	// Limit is the page size (0 = the server's default).
	Limit int
	// NextToken continues a listing from the cursor a previous page returned.
	NextToken string
}

// ListSandboxes returns one page of sandboxes and the cursor of the next
// page ("" when this was the last).
func (c *Client) ListSandboxes(ctx context.Context, opts ListOptions) ([]ListedSandbox, string, error) {
	q := url.Values{}
	if len(opts.Metadata) > 0 {
		// E2B's shape: one parameter holding a query-encoded k=v&k2=v2 list,
		// so that keys and values may hold '=' and '&'.
		md := url.Values{}
		keys := make([]string, 0, len(opts.Metadata))
		for k := range opts.Metadata {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			md.Set(k, opts.Metadata[k])
		}
		q.Set("metadata", md.Encode())
	}
	for _, s := range opts.States {
		q.Add("state", s)
	}
	if opts.Limit > 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.NextToken != "" {
		q.Set("nextToken", opts.NextToken)
	}
	resp, err := c.send(ctx, request{method: http.MethodGet, path: "/v2/sandboxes", query: q})
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	var out []ListedSandbox
	if err := decodeJSON(resp, &out); err != nil {
		return nil, "", err
	}
	return out, resp.Header.Get("X-Next-Token"), nil
}
