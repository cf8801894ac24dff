// Package server is warren's HTTP API: E2B's control-plane routes and
// warren's own extensions. It is the only package that turns errors into
// status codes.
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/accesstoken"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/metrics"
	"github.com/warrenhq/warren/internal/procs"
	"github.com/warrenhq/warren/internal/sandboxlog"
	"github.com/warrenhq/warren/internal/store"
)

// AdminTeam is the team of the key the daemon makes on first start; only
// its keys may manage keys and templates.
const AdminTeam = "admin"

// maxJSONBody bounds every JSON request body.
const maxJSONBody = 1 << 20

// defaultMaxUpload bounds a file upload when Deps.MaxUploadBytes is not set.
const defaultMaxUpload = 1 << 30

// Templates is what the API needs to manage templates.
type Templates interface {
	List(ctx context.Context) ([]store.Template, error)
	Delete(ctx context.Context, name string) error
}

// Keys is what the API needs of the key store.
type Keys interface {
	AuthenticateKey(ctx context.Context, plaintext string) (store.APIKey, error)
	CreateAPIKey(ctx context.Context, team, name string) (string, store.APIKey, error)
	ListAPIKeys(ctx context.Context, team string) ([]store.APIKey, error)
	RevokeAPIKey(ctx context.Context, id string) error
}

// Deps are the services the API is put in front of.
type Deps struct {
	Sessions Sessions
	// Commands runs exec and tool calls, Files file calls
	// (*commands.Service both).
	Commands  Commands
	Files     Files
	Processes Processes
	Keys      Keys
	Templates Templates
	// Procs holds the output of sandboxes' background processes.
	Procs *procs.Manager
	// Logs holds each sandbox's log (process output and lifecycle).
	Logs *sandboxlog.Logs
	// Tools describes the tools the sandboxes' agents run (GET /tools).
	Tools []client.Tool
	// MCP serves MCP Streamable HTTP at /mcp (nil: no MCP endpoint).
	MCP    http.Handler
	Log    *slog.Logger
	Health client.Health
	// Runtimes are the sandbox runtimes, listed in GET /health's
	// capabilities.
	Runtimes []client.RuntimeInfo
	// Metrics feeds /health, /metrics and /sandboxes/{id}/metrics (nil:
	// static health, no metrics). MetricsPublic serves /metrics without a key.
	Metrics       *metrics.Metrics
	MetricsPublic bool
	// Tokens issues and checks the sandbox plane's access tokens and
	// signed file URLs. Domain is the sandbox domain of host routing.
	// MaxUploadBytes bounds one file upload, through warren's API and
	// the sandbox plane (0: defaultMaxUpload).
	Tokens         *accesstoken.Issuer
	Domain         string
	MaxUploadBytes int64
}

// Server routes requests to handlers.
type Server struct {
	deps Deps
	// The session service, by the role each route group needs.
	records   Records
	lifecycle Lifecycle
	snapshots Snapshots
	networks  Networks
	plane     Plane
	daemon    Daemon

	mux   *routeMux
	authz *authCache
	ports portProxy
	envd  envdProxy
}

// New builds the API's handler.
func New(deps Deps) *Server {
	s := &Server{deps: deps, mux: newRouteMux(), authz: newAuthCache(deps.Keys)}
	if deps.Sessions != nil {
		s.records, s.lifecycle, s.snapshots = deps.Sessions, deps.Sessions, deps.Sessions
		s.networks, s.plane, s.daemon = deps.Sessions, deps.Sessions, deps.Sessions
	}
	s.routes()
	return s
}

func (s *Server) routes() {
	m := s.mux
	m.HandleFunc("GET /health", s.health)
	m.HandleFunc("GET /metrics", s.prometheus)
	m.HandleFunc("GET /openapi.json", s.openAPI)
	m.Handle("GET /sandboxes/{id}/metrics", s.auth(s.sandboxMetrics))

	m.Handle("POST /sandboxes", s.auth(s.createSandbox))
	m.Handle("POST /v2/sandboxes", s.auth(s.createSandbox))
	m.Handle("GET /sandboxes", s.auth(s.listSandboxes))
	m.Handle("GET /v2/sandboxes", s.auth(s.listSandboxes))
	m.Handle("GET /sandboxes/{id}", s.auth(s.getSandbox))
	m.Handle("DELETE /sandboxes/{id}", s.auth(s.deleteSandbox))

	m.Handle("GET /sandboxes/{id}/events", s.auth(s.sandboxEvents))
	m.Handle("GET /sandboxes/{id}/logs", s.auth(s.sandboxLogs))
	m.Handle("GET /v2/sandboxes/{id}/logs", s.auth(s.sandboxLogsV2))
	m.Handle("POST /sandboxes/{id}/pause", s.auth(s.pauseSandbox))
	m.Handle("POST /sandboxes/{id}/hibernate", s.auth(s.hibernateSandbox))
	m.Handle("POST /sandboxes/{id}/stop", s.auth(s.stopSandbox))
	m.Handle("POST /sandboxes/{id}/limits", s.auth(s.updateLimits))
	m.Handle("GET /sandboxes/{id}/network", s.auth(s.getNetwork))
	m.Handle("PUT /sandboxes/{id}/network", s.auth(s.updateNetwork))
	m.Handle("GET /sandboxes/{id}/network/events", s.auth(s.networkEvents))
	m.Handle("POST /sandboxes/{id}/resume", s.auth(s.resumeSandbox))
	m.Handle("POST /sandboxes/{id}/connect", s.auth(s.resumeSandbox))
	m.Handle("POST /v2/sandboxes/{id}/connect", s.auth(s.resumeSandbox))
	m.Handle("POST /sandboxes/{id}/timeout", s.auth(s.setTimeout))
	m.Handle("POST /sandboxes/{id}/exec", s.auth(s.exec))
	m.Handle("POST /sandboxes/{id}/processes", s.auth(s.startProcess))
	m.Handle("GET /sandboxes/{id}/processes", s.auth(s.listProcesses))
	m.Handle("GET /sandboxes/{id}/processes/{ref}/output", s.auth(s.processOutput))
	m.Handle("POST /sandboxes/{id}/processes/{ref}/stdin", s.auth(s.processStdin))
	m.Handle("POST /sandboxes/{id}/processes/{ref}/stdin/close", s.auth(s.processCloseStdin))
	m.Handle("POST /sandboxes/{id}/processes/{ref}/signal", s.auth(s.processSignal))
	m.Handle("GET /sandboxes/{id}/files", s.auth(s.readFile))
	m.Handle("PUT /sandboxes/{id}/files", s.auth(s.writeFile))
	m.Handle("DELETE /sandboxes/{id}/files", s.auth(s.removeFile))
	m.Handle("GET /sandboxes/{id}/files/stat", s.auth(s.statFile))
	m.Handle("GET /sandboxes/{id}/files/list", s.auth(s.listDir))
	m.Handle("POST /sandboxes/{id}/files/mkdir", s.auth(s.makeDir))
	m.Handle("POST /sandboxes/{id}/files/move", s.auth(s.moveFile))
	m.Handle("GET /sandboxes/{id}/ports/{port}/connect", s.auth(s.connectPort))
	m.Handle("GET /tools", s.auth(s.listTools))
	m.Handle("POST /sandboxes/{id}/tools/{name}", s.auth(s.callTool))
	m.Handle("GET /sandboxes/{id}/tools/calls", s.auth(s.toolCalls))

	m.Handle("POST /sandboxes/{id}/snapshots", s.auth(s.createSnapshot))
	m.Handle("POST /sandboxes/{id}/turns", s.auth(s.createTurn))
	m.Handle("POST /sandboxes/{id}/rollback", s.auth(s.rollback))
	m.Handle("POST /sandboxes/{id}/fork", s.auth(s.fork))
	m.Handle("POST /sandboxes/{id}/promote", s.auth(s.promote))
	m.Handle("GET /sandboxes/{id}/lineage", s.auth(s.lineage))
	m.Handle("GET /snapshots", s.auth(s.listSnapshots))
	m.Handle("GET /snapshots/{id}", s.auth(s.getSnapshot))
	m.Handle("DELETE /snapshots/{id}", s.auth(s.deleteSnapshot))
	m.Handle("GET /snapshots/{id}/diff", s.auth(s.diff))

	m.Handle("GET /pools", s.auth(s.listPools))
	m.Handle("GET /templates", s.auth(s.listTemplates))
	m.Handle("DELETE /templates/{id}", s.auth(s.deleteTemplateOrSnapshot))

	m.Handle("POST /api-keys", s.auth(s.admin(s.createKey)))
	m.Handle("GET /api-keys", s.auth(s.admin(s.listKeys)))
	m.Handle("DELETE /api-keys/{id}", s.auth(s.admin(s.revokeKey)))

	if s.deps.MCP != nil {
		m.Handle("/mcp", s.auth(s.deps.MCP.ServeHTTP)) // GET, POST and DELETE
	}

	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, r, fmt.Errorf("no route %s %s: %w", r.Method, r.URL.Path, errdefs.ErrNotFound))
	})
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				// A proxied stream broke mid-answer (e.g. its sandbox was
				// killed): the connection must be cut, not answered.
				s.observe(r, rw.status, time.Since(start))
				panic(p)
			}
			s.deps.Log.Error("handler panic", "method", r.Method, "path", r.URL.Path, "panic", p)
			if !rw.wrote {
				writeError(rw, r, errors.New("internal error"))
			}
		}
		s.observe(r, rw.status, time.Since(start))
		s.recordServerError(r, rw)
		s.deps.Log.Debug("request", "method", r.Method, "path", r.URL.Path, "status", rw.status, "dur", time.Since(start))
	}()
	// E2B's sandbox plane: envd (served by the agent) and servers inside
	// sandboxes, routed by headers or Host.
	if t, ok := sandboxTargetOf(r); ok {
		s.servePlane(rw, r, t)
		return
	}
	if isEnvdPath(r.URL.Path) {
		if r.URL.Path == "/files" && r.URL.Query().Get("signature") != "" {
			s.serveSigned(rw, r)
			return
		}
		s.planeError(rw, r, fmt.Errorf("%s is E2B's sandbox API: name the sandbox with the E2b-Sandbox-Id header (E2B_SANDBOX_URL) or a Host of <port>-<id>.<domain>: %w", r.URL.Path, errdefs.ErrInvalid))
		return
	}
	s.mux.ServeHTTP(rw, r)
}

// recordServerError keeps a 5xx answer among the daemon's last errors: it
// is the daemon's failure, not the caller's (a 4xx is the caller's).
func (s *Server) recordServerError(r *http.Request, rw *statusWriter) {
	if s.deps.Metrics == nil || rw.status < 500 {
		return
	}
	op := r.Pattern
	if op == "" {
		op = r.Method + " " + r.URL.Path
	}
	msg := rw.errMsg
	if msg == "" {
		msg = http.StatusText(rw.status)
	}
	s.deps.Metrics.Errors().Record(fmt.Sprintf("%s: %d", op, rw.status), r.PathValue("id"), msg)
}

type teamKey struct{}

func teamOf(r *http.Request) string { t, _ := r.Context().Value(teamKey{}).(string); return t }

// auth admits requests that carry a valid API key and records its team.
func (s *Server) auth(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := apiKeyOf(r)
		if key == "" {
			writeError(w, r, fmt.Errorf("missing API key: send it in the X-API-Key header: %w", errdefs.ErrUnauthenticated))
			return
		}
		k, err := s.authz.authenticate(r.Context(), key)
		if err != nil {
			if errdefs.IsNotFound(err) || errors.Is(err, errdefs.ErrUnauthenticated) {
				err = fmt.Errorf("invalid API key: %w", errdefs.ErrUnauthenticated)
			}
			writeError(w, r, err)
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), teamKey{}, k.Team)))
	})
}

// apiKeyOf is the request's API key: X-API-Key, or a Bearer Authorization.
func apiKeyOf(r *http.Request) string {
	if key := r.Header.Get("X-API-Key"); key != "" {
		return key
	}
	if b, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return b
	}
	return ""
}

// admin admits only the admin team's keys.
func (s *Server) admin(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if teamOf(r) != AdminTeam {
			writeError(w, r, fmt.Errorf("only an admin key may do this: %w", errdefs.ErrPermissionDenied))
			return
		}
		h(w, r)
	}
}

// decodeJSON reads a bounded JSON body into v. An empty body leaves v as is.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	return decodeJSONLimit(w, r, v, maxJSONBody)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
	errMsg string // the message of an error answer (writeError)
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
