package client

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// LifecycleService pauses, hibernates, resumes and stops sandboxes and sets
// their timeouts and limits (the API's lifecycle routes).
type LifecycleService struct{ t *transport }

// Pause freezes a sandbox (409 if it is paused already).
func (s *LifecycleService) Pause(ctx context.Context, id string) error {
	r, err := jsonBody(http.MethodPost, sandboxPath(id, "/pause"), struct{}{})
	if err != nil {
		return err
	}
	return s.t.call(ctx, r, nil)
}

// PauseFiles ends a sandbox's processes and keeps its files (E2B's pause
// {memory: false}): it holds no memory, and Resume boots it cold.
func (s *LifecycleService) PauseFiles(ctx context.Context, id string) error {
	r, err := jsonBody(http.MethodPost, sandboxPath(id, "/pause"), map[string]bool{"memory": false})
	if err != nil {
		return err
	}
	return s.t.call(ctx, r, nil)
}

// Reboot resumes a paused sandbox by booting it cold on its files, its
// memory dropped (E2B's connect {memory: false}); a running one is left as
// it is.
func (s *LifecycleService) Reboot(ctx context.Context, id string) (Sandbox, error) {
	var sb Sandbox
	r, err := jsonBody(http.MethodPost, sandboxPath(id, "/resume"), map[string]bool{"memory": false})
	if err != nil {
		return sb, err
	}
	err = s.t.call(ctx, r, &sb)
	return sb, err
}

// Hibernate saves a sandbox's memory and processes to disk and
// frees them (gvisor runtime; others answer 400). Resume restores it.
func (s *LifecycleService) Hibernate(ctx context.Context, id string) (SandboxDetail, error) {
	var sb SandboxDetail
	r, err := jsonBody(http.MethodPost, sandboxPath(id, "/hibernate"), struct{}{})
	if err != nil {
		return sb, err
	}
	err = s.t.call(ctx, r, &sb)
	return sb, err
}

// Resume thaws a paused sandbox or restores a hibernated one; a
// running one is left as it is.
func (s *LifecycleService) Resume(ctx context.Context, id string) (Sandbox, error) {
	var sb Sandbox
	r, err := jsonBody(http.MethodPost, sandboxPath(id, "/resume"), struct{}{})
	if err != nil {
		return sb, err
	}
	err = s.t.call(ctx, r, &sb)
	return sb, err
}

// SetTimeout makes a sandbox time out seconds from now (0 = never).
func (s *LifecycleService) SetTimeout(ctx context.Context, id string, seconds int64) error {
	r, err := jsonBody(http.MethodPost, sandboxPath(id, "/timeout"), map[string]int64{"timeout": seconds})
	if err != nil {
		return err
	}
	return s.t.call(ctx, r, nil)
}

// Stop ends a sandbox's processes and keeps its filesystem; the
// processes get SIGTERM and grace to exit first (kill skips that).
func (s *LifecycleService) Stop(ctx context.Context, id string, grace time.Duration, kill bool) (SandboxDetail, error) {
	var out SandboxDetail
	g := grace.Seconds()
	r, err := jsonBody(http.MethodPost, sandboxPath(id, "/stop"), map[string]any{"grace": g, "kill": kill})
	if err != nil {
		return out, err
	}
	err = s.t.call(ctx, r, &out)
	return out, err
}

// Drain refuses new calls to a sandbox, waits up to wait for its
// running commands, then stops it (SIGTERM, SIGKILL after grace).
func (s *LifecycleService) Drain(ctx context.Context, id string, wait, grace time.Duration) (SandboxDetail, error) {
	var out SandboxDetail
	r, err := jsonBody(http.MethodPost, sandboxPath(id, "/stop"), map[string]any{"drain": true, "drainWait": wait.Seconds(), "grace": grace.Seconds()})
	if err != nil {
		return out, err
	}
	err = s.t.call(ctx, r, &out)
	return out, err
}

// UpdateLimits changes a running sandbox's limits in place (zero fields
// keep theirs; DiskMB cannot change).
func (s *LifecycleService) UpdateLimits(ctx context.Context, id string, l Limits) (SandboxDetail, error) {
	var out SandboxDetail
	r, err := jsonBody(http.MethodPost, sandboxPath(id, "/limits"), l)
	if err != nil {
		return out, err
	}
	err = s.t.call(ctx, r, &out)
	return out, err
}

// MoveResult is where a moved sandbox went and how long the move took.
type MoveResult struct {
	SandboxID string  `json:"sandboxID"`
	From      string  `json:"from"`
	To        string  `json:"to"`
	Seconds   float64 `json:"seconds"`
}

// Move moves a sandbox to another node of a fleet, through the fleet's
// gateway (admin keys only): node "" lets the gateway pick. A running
// sandbox moves only with stop, which stops it first: its files move, its
// processes do not.
func (s *LifecycleService) Move(ctx context.Context, id, node string, stop bool) (MoveResult, error) {
	var res MoveResult
	r, err := jsonBody(http.MethodPost, sandboxPath(id, "/move"), map[string]string{"node": node})
	if err != nil {
		return res, err
	}
	if stop {
		r.query = url.Values{"stop": {"true"}}
	}
	err = s.t.call(ctx, r, &res)
	return res, err
}
