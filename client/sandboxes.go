package client

import (
	"context"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"time"
)

// SandboxesService creates, lists, describes and deletes sandboxes, and
// reads their events, logs and resource samples (the API's sandboxes routes).
type SandboxesService struct{ t *transport }

// Create starts a sandbox. With in.IdempotencyKey set, a retry of the same
// create (after a timeout or a broken connection) gets the sandbox the first
// attempt made instead of a second one.
func (s *SandboxesService) Create(ctx context.Context, in NewSandbox) (Sandbox, error) {
	var sb Sandbox
	r, err := jsonBody(http.MethodPost, "/sandboxes", in)
	if err != nil {
		return sb, err
	}
	if in.IdempotencyKey != "" {
		r.header = http.Header{"Idempotency-Key": {in.IdempotencyKey}}
	}
	err = s.t.call(ctx, r, &sb)
	return sb, err
}

// Get describes one sandbox.
func (s *SandboxesService) Get(ctx context.Context, id string) (SandboxDetail, error) {
	var sb SandboxDetail
	err := s.t.call(ctx, request{method: http.MethodGet, path: sandboxPath(id, "")}, &sb)
	return sb, err
}

// Delete kills a sandbox and removes it.
func (s *SandboxesService) Delete(ctx context.Context, id string) error {
	return s.t.call(ctx, request{method: http.MethodDelete, path: sandboxPath(id, "")}, nil)
}

// ListOptions filter and page GET /v2/sandboxes.
type ListOptions struct {
	// Metadata keeps the sandboxes whose metadata holds every pair.
	Metadata map[string]string
	// States keeps the sandboxes in one of these states ("running", "paused").
	States []string
	// Template keeps the sandboxes made from this template ("" = any).
	Template string
	// StartedAfter keeps the sandboxes started after it (zero = any).
	StartedAfter time.Time
	// Order is "desc" (the latest started first, the server's default) or
	// "asc"; "" = the server's default.
	Order string
	// Limit is the page size (0 = the server's default).
	Limit int
	// NextToken continues a listing from the cursor a previous page returned.
	NextToken string
}

// List returns one page of sandboxes and the cursor of the next
// page ("" when this was the last).
func (s *SandboxesService) List(ctx context.Context, opts ListOptions) ([]ListedSandbox, string, error) {
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
	for _, st := range opts.States {
		q.Add("state", st)
	}
	if opts.Template != "" {
		q.Set("template", opts.Template)
	}
	if !opts.StartedAfter.IsZero() {
		q.Set("startedAfter", opts.StartedAfter.UTC().Format(time.RFC3339Nano))
	}
	if opts.Order != "" {
		q.Set("order", opts.Order)
	}
	if opts.Limit > 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.NextToken != "" {
		q.Set("nextToken", opts.NextToken)
	}
	resp, err := s.t.send(ctx, request{method: http.MethodGet, path: "/v2/sandboxes", query: q})
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
