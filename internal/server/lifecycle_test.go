package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/store"
)

// fakeLifecycle answers err to every call and records the last one.
type fakeLifecycle struct {
	Lifecycle // calls the test does not expect panic
	err       error
	asked     string
}

func (f *fakeLifecycle) Pause(_ context.Context, team, id string) error {
	f.asked = "pause " + team + "/" + id
	return f.err
}

func (f *fakeLifecycle) CheckTimeout(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("negative: %w", errdefs.ErrInvalid)
	}
	return nil
}

func (f *fakeLifecycle) SetTimeout(_ context.Context, team, id string, d time.Duration) error {
	f.asked += fmt.Sprintf("timeout %s/%s %s", team, id, d)
	return f.err
}

func (f *fakeLifecycle) ExtendTimeout(_ context.Context, team, id string, d time.Duration) error {
	f.asked += fmt.Sprintf("extend %s/%s %s", team, id, d)
	return f.err
}

// Resume reports the sandbox resumed when its id says it was paused.
func (f *fakeLifecycle) Resume(_ context.Context, team, id string) (bool, error) {
	f.asked = "resume " + team + "/" + id + "; "
	return strings.HasPrefix(id, "paused"), f.err
}

func (f *fakeLifecycle) Get(_ context.Context, team, id string) (store.Sandbox, error) {
	return store.Sandbox{ID: id, Team: team, Runtime: "native"}, f.err
}

// The lifecycle routes against a fake of their one role: the status of
// each error kind, and what reached the service.
func TestLifecycleRoutes(t *testing.T) {
	for _, tc := range []struct {
		name, path, body string
		err              error
		status           int
		asked            string
	}{
		{"pause", "/sandboxes/sb/pause", ``, nil, 204, "pause t/sb"},
		{"pause a paused one", "/sandboxes/sb/pause", ``, fmt.Errorf("already paused: %w", errdefs.ErrConflict), 409, "pause t/sb"},
		{"pause another team's", "/sandboxes/sb/pause", ``, fmt.Errorf("sandbox sb: %w", errdefs.ErrNotFound), 404, "pause t/sb"},
		{"timeout", "/sandboxes/sb/timeout", `{"timeout":60}`, nil, 204, "timeout t/sb 1m0s"},
		{"timeout missing", "/sandboxes/sb/timeout", `{}`, nil, 400, ""},
		{"timeout of a stopped one", "/sandboxes/sb/timeout", `{"timeout":60}`, fmt.Errorf("stopped: %w", errdefs.ErrConflict), 409, "timeout t/sb 1m0s"},
		// connect: a running sandbox's end only ever moves later; a
		// resumed one runs for the timeout asked.
		{"connect to a running one", "/v2/sandboxes/sb/connect", `{"timeout":60}`, nil, 200, "resume t/sb; extend t/sb 1m0s"},
		{"connect resuming", "/v2/sandboxes/pausedsb/connect", `{"timeout":60}`, nil, 201, "resume t/pausedsb; timeout t/pausedsb 1m0s"},
		{"connect without a timeout", "/v2/sandboxes/sb/connect", `{}`, nil, 200, "resume t/sb; "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(Deps{Keys: fakeKeys{}, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
			f := &fakeLifecycle{err: tc.err}
			s.lifecycle.lifecycle = f
			req := httptest.NewRequest("POST", tc.path, strings.NewReader(tc.body))
			req.Header.Set("X-API-Key", "k")
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, req)
			if rec.Code != tc.status || f.asked != tc.asked {
				t.Fatalf("status %d asked %q, want %d %q: %s", rec.Code, f.asked, tc.status, tc.asked, rec.Body)
			}
		})
	}
}

// New hands the session service to every route group by its role.
func TestNewWiresEveryRole(t *testing.T) {
	var sessions struct{ Sessions }
	s := New(Deps{Sessions: sessions, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	for name, role := range map[string]any{"records": s.sandboxes.records, "lifecycle": s.lifecycle.lifecycle,
		"snapshots": s.snapshots.snapshots, "networks": s.networks.networks, "plane": s.envd.plane, "daemon": s.health.daemon,
		"logs' records": s.logs.records, "tools' records": s.tools.records, "metrics' records": s.stats.records,
		"processes' plane": s.processes.plane, "ports' plane": s.ports.plane} {
		if role == nil {
			t.Errorf("the %s role is not wired", name)
		}
	}
}
