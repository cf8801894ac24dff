// Package client is warren's Go API client. It speaks the REST API that
// `warren serve` exposes (the E2B-shaped control plane plus warren's own
// endpoints) and is what the `warren` CLI is built on.
//
// Every method takes a context first. An answer outside 2xx becomes a
// *Error (use errors.As to read its Code); a failure to reach the daemon is
// returned wrapped, with the URL that was tried.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"
)

// maxErrorBody bounds how much of an error answer is read: error bodies are
// small JSON objects, and a misbehaving proxy must not make us buffer a page.
const maxErrorBody = 64 << 10

// Client talks to one warren daemon. It is safe for concurrent use. Its
// calls are grouped into services after the API's route groups
// (c.Sandboxes.Create, c.Snapshots.Fork, c.Files.Read, ...), which all
// send their requests through one shared transport.
type Client struct {
	t *transport

	Meta      *MetaService      // health and the daemon's metrics
	Sandboxes *SandboxesService // create, list, get, delete; events, logs, metrics
	Lifecycle *LifecycleService // pause, hibernate, resume, stop, drain, timeout, limits
	Commands  *CommandsService  // exec
	Processes *ProcessesService // background processes
	Tools     *ToolsService     // tool calls
	Files     *FilesService     // files inside a sandbox
	Network   *NetworkService   // egress policy, its audit, and ports
	Snapshots *SnapshotsService // snapshots, turns, rollback, fork, promote, diff, lineage
	Templates *TemplatesService
	Pools     *PoolsService
	APIKeys   *APIKeysService
	Teams     *TeamsService
	Volumes   *VolumesService // shared volumes and their content
	Secrets   *SecretsService // write-only secrets for the egress proxy
}

// transport is what every service shares: where the daemon is, the key to
// send and the http.Client to send it with.
type transport struct {
	base   *url.URL
	apiKey string
	http   *http.Client
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient makes the Client send its requests through hc (for custom
// transports, TLS, or test servers). Leave hc's Timeout at zero if you use
// Commands.Exec: a command's output streams for as long as the command runs.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) {
		if hc != nil {
			c.t.http = hc
		}
	}
}

// New returns a Client for the daemon at baseURL (for example
// "http://127.0.0.1:3000") that authenticates with apiKey. An empty apiKey
// sends no X-API-Key header (enough for Meta.Health). A baseURL that does
// not parse is reported by the first call.
func New(baseURL, apiKey string, opts ...Option) *Client {
	t := &transport{apiKey: apiKey, http: http.DefaultClient}
	t.base, _ = url.Parse(strings.TrimRight(baseURL, "/"))
	c := &Client{
		t:         t,
		Meta:      &MetaService{t: t},
		Sandboxes: &SandboxesService{t: t},
		Lifecycle: &LifecycleService{t: t},
		Commands:  &CommandsService{t: t},
		Processes: &ProcessesService{t: t},
		Tools:     &ToolsService{t: t},
		Files:     &FilesService{t: t},
		Network:   &NetworkService{t: t},
		Snapshots: &SnapshotsService{t: t},
		Templates: &TemplatesService{t: t},
		Pools:     &PoolsService{t: t},
		APIKeys:   &APIKeysService{t: t},
		Teams:     &TeamsService{t: t},
		Volumes:   &VolumesService{t: t},
		Secrets:   &SecretsService{t: t},
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// request is one API call.
type request struct {
	method string
	path   string // already escaped where it holds user input
	query  url.Values
	body   io.Reader
	// contentType of body; "application/json" when body came from jsonBody.
	contentType string
	// header holds further request headers (Idempotency-Key).
	header http.Header
}

func jsonBody(method, path string, v any) (request, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return request{}, fmt.Errorf("encode request body: %w", err)
	}
	return request{method: method, path: path, body: bytes.NewReader(b), contentType: "application/json"}, nil
}

// send performs r and returns the response when its status is 2xx; any
// other status is decoded into a *Error and the body closed.
func (t *transport) send(ctx context.Context, r request) (*http.Response, error) {
	if t.base == nil || t.base.Scheme == "" || t.base.Host == "" {
		return nil, fmt.Errorf("invalid warren URL %q: want something like http://127.0.0.1:3000", t.baseString())
	}
	// r.path is already escaped, so the URL is put together as text.
	target := t.base.String() + r.path
	if len(r.query) > 0 {
		target += "?" + r.query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, r.method, target, r.body)
	if err != nil {
		return nil, fmt.Errorf("build %s %s: %w", r.method, r.path, err)
	}
	for k, vs := range r.header {
		req.Header[k] = vs
	}
	if r.contentType != "" {
		req.Header.Set("Content-Type", r.contentType)
	}
	if t.apiKey != "" {
		req.Header.Set("X-API-Key", t.apiKey)
	}
	resp, err := t.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("cannot reach warren at %s (is `warren serve` running?): %w", t.baseString(), err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		return nil, decodeError(resp)
	}
	return resp, nil
}

// call performs r and decodes a JSON answer into out (nil: discard it).
func (t *transport) call(ctx context.Context, r request, out any) error {
	resp, err := t.send(ctx, r)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return decodeJSON(resp, out)
}

func decodeJSON(resp *http.Response, out any) error {
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decode answer of %s %s: %w", resp.Request.Method, resp.Request.URL.Path, err)
	}
	return nil
}

// decodeError turns a non-2xx answer into a *Error. A body that is not the
// API's JSON error (a proxy's page, a plain-text 404) falls back to the
// status text, with the body appended when it is short readable text.
func decodeError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var e Error
	if err := json.Unmarshal(b, &e); err == nil && e.Message != "" {
		if e.Code == 0 {
			e.Code = resp.StatusCode
		}
		return &e
	}
	msg := http.StatusText(resp.StatusCode)
	if msg == "" {
		msg = fmt.Sprintf("HTTP status %d", resp.StatusCode)
	}
	if text := strings.TrimSpace(string(b)); text != "" && len(text) <= 200 && utf8.ValidString(text) &&
		!strings.ContainsAny(text, "\n<{") {
		msg += ": " + text
	}
	return &Error{Code: resp.StatusCode, Message: msg}
}

// StatusCode returns the HTTP status carried by err when it is (or wraps) a
// *Error, and 0 otherwise.
func StatusCode(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

func (t *transport) baseString() string {
	if t.base == nil {
		return ""
	}
	return t.base.String()
}

// sandboxPath returns /sandboxes/{id}{suffix} with id escaped.
func sandboxPath(id, suffix string) string {
	return "/sandboxes/" + url.PathEscape(id) + suffix
}
