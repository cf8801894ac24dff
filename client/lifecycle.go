package client

import (
	"context"
	"net/http"
	"time"
)

// PauseSandbox freezes a sandbox (409 if it is paused already).
func (c *Client) PauseSandbox(ctx context.Context, id string) error {
	r, err := jsonBody(http.MethodPost, sandboxPath(id, "/pause"), struct{}{})
	if err != nil {
		return err
	}
	return c.call(ctx, r, nil)
}

// HibernateSandbox saves a sandbox's memory and processes to disk and
// frees them (gvisor runtime; others answer 400). ResumeSandbox restores it.
func (c *Client) HibernateSandbox(ctx context.Context, id string) (SandboxDetail, error) {
	var s SandboxDetail
	r, err := jsonBody(http.MethodPost, sandboxPath(id, "/hibernate"), struct{}{})
	if err != nil {
		return s, err
	}
	err = c.call(ctx, r, &s)
	return s, err
}

// ResumeSandbox thaws a paused sandbox or restores a hibernated one; a
// running one is left as it is.
func (c *Client) ResumeSandbox(ctx context.Context, id string) (Sandbox, error) {
	var s Sandbox
	r, err := jsonBody(http.MethodPost, sandboxPath(id, "/resume"), struct{}{})
	if err != nil {
		return s, err
	}
	err = c.call(ctx, r, &s)
	return s, err
}

// SetTimeout makes a sandbox time out seconds from now (0 = never).
func (c *Client) SetTimeout(ctx context.Context, id string, seconds int64) error {
	r, err := jsonBody(http.MethodPost, sandboxPath(id, "/timeout"), map[string]int64{"timeout": seconds})
	if err != nil {
		return err
	}
	return c.call(ctx, r, nil)
}

// StopSandbox ends a sandbox's processes and keeps its filesystem; the
// processes get SIGTERM and grace to exit first (kill skips that).
func (c *Client) StopSandbox(ctx context.Context, id string, grace time.Duration, kill bool) (SandboxDetail, error) {
	var out SandboxDetail
	g := grace.Seconds()
	r, err := jsonBody(http.MethodPost, sandboxPath(id, "/stop"), map[string]any{"grace": g, "kill": kill})
	if err != nil {
		return out, err
	}
	err = c.call(ctx, r, &out)
	return out, err
}

// DrainSandbox refuses new calls to a sandbox, waits up to wait for its
// running commands, then stops it (SIGTERM, SIGKILL after grace).
func (c *Client) DrainSandbox(ctx context.Context, id string, wait, grace time.Duration) (SandboxDetail, error) {
	var out SandboxDetail
	r, err := jsonBody(http.MethodPost, sandboxPath(id, "/stop"), map[string]any{"drain": true, "drainWait": wait.Seconds(), "grace": grace.Seconds()})
	if err != nil {
		return out, err
	}
	err = c.call(ctx, r, &out)
	return out, err
}

// UpdateLimits changes a running sandbox's limits in place (zero fields
// keep theirs; DiskMB cannot change).
func (c *Client) UpdateLimits(ctx context.Context, id string, l Limits) (SandboxDetail, error) {
	var out SandboxDetail
	r, err := jsonBody(http.MethodPost, sandboxPath(id, "/limits"), l)
	if err != nil {
		return out, err
	}
	err = c.call(ctx, r, &out)
	return out, err
}
