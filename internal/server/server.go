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
	"time"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/accesstoken"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/metrics"
	"github.com/warrenhq/warren/internal/procs"
	"github.com/warrenhq/warren/internal/sandboxlog"
	"github.com/warrenhq/warren/internal/store"
	"github.com/warrenhq/warren/internal/ui"
)

// AdminTeam is the team of the key the daemon makes on first start; only
// its keys may manage keys and templates.
const AdminTeam = "admin"

// maxJSONBody bounds every JSON request body.
const maxJSONBody = 1 << 20

// defaultMaxUpload bounds a file upload when Deps.MaxUploadBytes is not set.
const defaultMaxUpload = 1 << 30

// defaultMaxImport bounds a snapshot import when Deps.MaxImportBytes is not
// set.
const defaultMaxImport = 64 << 30

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
	// Volumes are the shared volumes (nil: their routes answer 501).
	Volumes Volumes
	// Devices are the host's devices (nil: GET /devices answers 501).
	Devices Devices
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
	// MaxImportBytes bounds one snapshot bundle an import reads (0:
	// defaultMaxImport).
	MaxImportBytes int64
	// Secrets keeps the teams' secrets (nil: /secrets answers 501).
	Secrets Secrets
	// Pull lets POST /snapshots/pull fetch snapshots from peers (node
	// mode; a nil FleetKey answers 501).
	Pull PullConfig
	// TLSCACert is the certificate (PEM) of warren's own CA, served at
	// GET /tls/ca.pem (nil: none, 404).
	TLSCACert []byte
	// TemplateBuilds builds templates from steps, E2B's Template SDK
	// (nil: its routes answer 501).
	TemplateBuilds TemplateBuilds
}

// Server routes requests to handlers. Each route group is a type of its
// own that holds only the roles and shared helpers its handlers use; New
// builds them and routes registers their handlers.
type Server struct {
	mux     *routeMux
	log     *slog.Logger
	metrics *metrics.Metrics

	sandboxes *sandboxRoutes
	logs      *logRoutes
	lifecycle *lifecycleRoutes
	snapshots *snapshotRoutes
	networks  *networkRoutes
	commands  *commandRoutes
	tools     *toolRoutes
	files     *fileRoutes
	processes *processRoutes
	envd      *envdRoutes
	ports     *portRoutes
	health    *healthRoutes
	stats     *metricsRoutes
	admin     *adminRoutes
	teams     *teamRoutes
	moves     *moveRoutes
	replicas  *replicaRoutes
	volumes   *volumeRoutes
	devices   *deviceRoutes
	ca        *caRoutes
	terminals *terminalRoutes
	secrets   *secretRoutes
	tplbuilds *templateBuildRoutes
}

// New builds the API's handler.
func New(deps Deps) *Server {
	s := &Server{mux: newRouteMux(), log: deps.Log, metrics: deps.Metrics}
	authz := newAuthCache(deps.Keys)
	// The session service by the role each route group needs; nil roles
	// when there is none (handler tests).
	var (
		records   Records
		lifecycle Lifecycle
		snapshots Snapshots
		networks  Networks
		plane     Plane
		daemon    Daemon
	)
	if deps.Sessions != nil {
		records, lifecycle, snapshots = deps.Sessions, deps.Sessions, deps.Sessions
		networks, plane, daemon = deps.Sessions, deps.Sessions, deps.Sessions
	}
	views := sandboxViews{domain: deps.Domain, tokens: deps.Tokens, runtimes: deps.Runtimes}
	maxUpload := uploadLimit(deps.MaxUploadBytes)
	s.admin = &adminRoutes{templates: deps.Templates, keys: deps.Keys, authz: authz}
	s.teams = &teamRoutes{teams: deps.Sessions}
	s.sandboxes = &sandboxRoutes{sandboxViews: views, records: records, devices: deps.Devices}
	if deps.Volumes != nil {
		s.sandboxes.volumes = deps.Volumes
	}
	s.logs = &logRoutes{records: records, logs: deps.Logs}
	s.lifecycle = &lifecycleRoutes{sandboxViews: views, lifecycle: lifecycle}
	maxImport := deps.MaxImportBytes
	if maxImport <= 0 {
		maxImport = defaultMaxImport
	}
	s.snapshots = &snapshotRoutes{sandboxViews: views, snapshots: snapshots, deleteTemplate: adminOnly(s.admin.deleteTemplate), maxImport: maxImport, log: deps.Log}
	s.snapshots.pull = &puller{PullConfig: deps.Pull, snapshots: snapshots, maxImport: maxImport, http: &http.Client{}, log: deps.Log}
	s.networks = &networkRoutes{networks: networks}
	s.secrets = &secretRoutes{secrets: deps.Secrets}
	s.tplbuilds = &templateBuildRoutes{builds: deps.TemplateBuilds, maxUpload: maxUpload}
	s.sandboxes.builtTemplates = s.tplbuilds
	s.admin.built = s.tplbuilds
	s.snapshots.deleteBuilt = s.tplbuilds.deleteBuilt
	mover, _ := deps.Sessions.(Mover)
	s.moves = &moveRoutes{sandboxViews: views, mover: mover, snapshots: s.snapshots}
	replicator, _ := deps.Sessions.(Replicator)
	s.replicas = &replicaRoutes{sandboxViews: views, replicator: replicator, snapshots: s.snapshots}
	s.volumes = &volumeRoutes{volumes: deps.Volumes, maxUpload: maxUpload}
	s.devices = &deviceRoutes{devices: deps.Devices}
	s.commands = &commandRoutes{commands: deps.Commands}
	s.tools = &toolRoutes{commands: deps.Commands, records: records, tools: deps.Tools}
	s.files = &fileRoutes{files: deps.Files, log: deps.Log, maxUpload: maxUpload}
	s.processes = &processRoutes{processes: deps.Processes, plane: plane, procs: deps.Procs}
	s.envd = &envdRoutes{plane: plane, tokens: deps.Tokens, authz: authz, log: deps.Log, maxUpload: maxUpload}
	s.ports = &portRoutes{plane: plane, tokens: deps.Tokens, authz: authz, log: deps.Log}
	s.health = &healthRoutes{static: deps.Health, runtimes: deps.Runtimes, daemon: daemon, metrics: deps.Metrics, authz: authz}
	s.stats = &metricsRoutes{records: records, metrics: deps.Metrics, public: deps.MetricsPublic, authz: authz}
	s.ca = &caRoutes{pem: deps.TLSCACert}
	s.routes(authz.requireKey)
	s.terminals = &terminalRoutes{plane: plane, log: deps.Log}
	s.mux.Handle("GET /sandboxes/{id}/terminal", keyFromProtocol(authz.requireKey(s.terminals.terminal)))
	s.mux.Handle("GET /ui/", ui.Handler())
	s.mux.Handle("GET /ui", http.RedirectHandler("/ui/", http.StatusMovedPermanently))
	if deps.MCP != nil {
		s.mux.Handle("/mcp", authz.requireKey(deps.MCP.ServeHTTP)) // GET, POST and DELETE
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, r, fmt.Errorf("no route %s %s: %w", r.Method, r.URL.Path, errdefs.ErrNotFound))
	})
	return s
}

// routes registers every route group's handlers; auth admits a request
// with a valid API key.
func (s *Server) routes(auth func(http.HandlerFunc) http.Handler) {
	m := s.mux
	m.HandleFunc("GET /health", s.health.health)
	m.HandleFunc("GET /openapi.json", serveOpenAPI)
	m.HandleFunc("GET /tls/ca.pem", s.ca.caCert)
	m.HandleFunc("GET /signed-urls/owner", s.envd.signedOwner)
	m.Handle("GET /pools", auth(s.health.listPools))
	m.HandleFunc("GET /metrics", s.stats.prometheus)
	m.Handle("GET /sandboxes/{id}/metrics", auth(s.stats.sandboxMetrics))

	m.Handle("POST /sandboxes", auth(s.sandboxes.createSandbox))
	m.Handle("POST /v2/sandboxes", auth(s.sandboxes.createSandbox))
	m.Handle("GET /sandboxes", auth(s.sandboxes.listSandboxes))
	m.Handle("GET /v2/sandboxes", auth(s.sandboxes.listSandboxes))
	m.Handle("GET /sandboxes/{id}", auth(s.sandboxes.getSandbox))
	m.Handle("DELETE /sandboxes/{id}", auth(s.sandboxes.deleteSandbox))
	m.Handle("GET /sandboxes/{id}/events", auth(s.sandboxes.sandboxEvents))
	m.Handle("GET /sandboxes/{id}/logs", auth(s.logs.sandboxLogs))
	m.Handle("GET /v2/sandboxes/{id}/logs", auth(s.logs.sandboxLogsV2))

	m.Handle("POST /sandboxes/{id}/pause", auth(s.lifecycle.pauseSandbox))
	m.Handle("POST /sandboxes/{id}/hibernate", auth(s.lifecycle.hibernateSandbox))
	m.Handle("POST /sandboxes/{id}/stop", auth(s.lifecycle.stopSandbox))
	m.Handle("POST /sandboxes/{id}/limits", auth(s.lifecycle.updateLimits))
	m.Handle("POST /sandboxes/{id}/resume", auth(s.lifecycle.resumeSandbox))
	m.Handle("POST /sandboxes/{id}/connect", auth(s.lifecycle.resumeSandbox))
	m.Handle("POST /v2/sandboxes/{id}/connect", auth(s.lifecycle.resumeSandbox))
	m.Handle("POST /sandboxes/{id}/timeout", auth(s.lifecycle.setTimeout))

	m.Handle("GET /sandboxes/{id}/network", auth(s.networks.getNetwork))
	m.Handle("PUT /sandboxes/{id}/network", auth(s.networks.updateNetwork))
	m.Handle("GET /sandboxes/{id}/network/events", auth(s.networks.networkEvents))

	m.Handle("POST /sandboxes/{id}/exec", auth(s.commands.exec))
	m.Handle("GET /tools", auth(s.tools.listTools))
	m.Handle("POST /sandboxes/{id}/tools/{name}", auth(s.tools.callTool))
	m.Handle("GET /sandboxes/{id}/tools/calls", auth(s.tools.toolCalls))
	m.Handle("POST /sandboxes/{id}/processes", auth(s.processes.startProcess))
	m.Handle("GET /sandboxes/{id}/processes", auth(s.processes.listProcesses))
	m.Handle("GET /sandboxes/{id}/processes/{ref}/output", auth(s.processes.processOutput))
	m.Handle("POST /sandboxes/{id}/processes/{ref}/stdin", auth(s.processes.processStdin))
	m.Handle("POST /sandboxes/{id}/processes/{ref}/stdin/close", auth(s.processes.processCloseStdin))
	m.Handle("POST /sandboxes/{id}/processes/{ref}/signal", auth(s.processes.processSignal))
	s.fileRoutes(m, auth)
	m.Handle("GET /sandboxes/{id}/ports/{port}/connect", auth(s.ports.connectPort))

	m.Handle("POST /sandboxes/{id}/snapshots", auth(s.snapshots.createSnapshot))
	m.Handle("POST /sandboxes/{id}/turns", auth(s.snapshots.createTurn))
	m.Handle("POST /sandboxes/{id}/rollback", auth(s.snapshots.rollback))
	m.Handle("POST /sandboxes/{id}/fork", auth(s.snapshots.fork))
	m.Handle("POST /sandboxes/{id}/promote", auth(s.snapshots.promote))
	m.Handle("GET /sandboxes/{id}/lineage", auth(s.snapshots.lineage))
	m.Handle("GET /snapshots", auth(s.snapshots.listSnapshots))
	m.Handle("GET /snapshots/{id}", auth(s.snapshots.getSnapshot))
	m.Handle("DELETE /snapshots/{id}", auth(s.snapshots.deleteSnapshot))
	m.Handle("GET /snapshots/{id}/diff", auth(s.snapshots.diff))
	m.Handle("GET /snapshots/{id}/export", auth(s.snapshots.exportSnapshot))
	m.Handle("POST /snapshots/import", auth(s.snapshots.importSnapshot))
	m.Handle("POST /snapshots/pull", auth(adminOnly(s.snapshots.pullSnapshot)))
	m.Handle("POST /sandboxes/{id}/merge", auth(s.snapshots.merge))
	m.Handle("GET /sandboxes/{id}/forks/summary", auth(s.snapshots.forksSummary))
	s.fleetRoutes(m, auth)
	m.Handle("DELETE /templates/{id}", auth(s.snapshots.deleteTemplateOrSnapshot))

	s.volumes.routes(m, auth)
	m.Handle("GET /devices", auth(s.devices.listDevices))

	m.Handle("GET /templates", auth(s.admin.listTemplates))
	s.secrets.routes(m, auth)
	s.tplbuilds.routes(m, auth)
	m.Handle("POST /api-keys", auth(adminOnly(s.admin.createKey)))
	m.Handle("GET /api-keys", auth(adminOnly(s.admin.listKeys)))
	m.Handle("DELETE /api-keys/{id}", auth(adminOnly(s.admin.revokeKey)))
	m.Handle("PUT /teams/{team}/limits", auth(adminOnly(s.teams.setLimits)))
	m.Handle("GET /teams/{team}/usage", auth(s.teams.usage))
}

// fileRoutes are the files API's calls (E2B's REST form is on the sandbox
// plane, envd.go).
func (s *Server) fileRoutes(m *routeMux, auth func(http.HandlerFunc) http.Handler) {
	m.Handle("GET /sandboxes/{id}/files", auth(s.files.readFile))
	m.Handle("PUT /sandboxes/{id}/files", auth(s.files.writeFile))
	m.Handle("DELETE /sandboxes/{id}/files", auth(s.files.removeFile))
	m.Handle("GET /sandboxes/{id}/files/stat", auth(s.files.statFile))
	m.Handle("GET /sandboxes/{id}/files/list", auth(s.files.listDir))
	m.Handle("POST /sandboxes/{id}/files/mkdir", auth(s.files.makeDir))
	m.Handle("POST /sandboxes/{id}/files/move", auth(s.files.moveFile))
}

// fleetRoutes are the calls a fleet makes of a node (admin key only):
// moves and replicas.
func (s *Server) fleetRoutes(m *routeMux, auth func(http.HandlerFunc) http.Handler) {
	m.Handle("POST /sandboxes/{id}/export", auth(adminOnly(s.moves.exportSandbox)))
	m.Handle("POST /sandboxes/adopt", auth(adminOnly(s.moves.adoptSandbox)))
	m.Handle("POST /sandboxes/{id}/forget", auth(adminOnly(s.moves.forgetSandbox)))
	m.Handle("POST /sandboxes/{id}/move", auth(adminOnly(s.moves.moveHere)))
	m.Handle("POST /sandboxes/{id}/replica", auth(adminOnly(s.replicas.takeReplica)))
	m.Handle("POST /sandboxes/{id}/replica/pull", auth(adminOnly(s.replicas.pullReplica)))
	m.Handle("POST /sandboxes/{id}/restore", auth(adminOnly(s.replicas.restoreReplica)))
	m.Handle("GET /fleet/nodes", auth(noFleetNodes))
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
			s.log.Error("handler panic", "method", r.Method, "path", r.URL.Path, "panic", p)
			if !rw.wrote {
				writeError(rw, r, errors.New("internal error"))
			}
		}
		s.observe(r, rw.status, time.Since(start))
		s.recordServerError(r, rw)
		s.log.Debug("request", "method", r.Method, "path", r.URL.Path, "status", rw.status, "dur", time.Since(start))
	}()
	// E2B's sandbox plane: envd (served by the agent) and servers inside
	// sandboxes, routed by headers or Host.
	if t, ok := sandboxTargetOf(r); ok {
		s.servePlane(rw, r, t)
		return
	}
	if isEnvdPath(r.URL.Path) {
		if r.URL.Path == "/files" && r.URL.Query().Get("signature") != "" {
			s.envd.serveSigned(rw, r)
			return
		}
		planeError(rw, r, fmt.Errorf("%s is E2B's sandbox API: name the sandbox with the E2b-Sandbox-Id header (E2B_SANDBOX_URL) or a Host of <port>-<id>.<domain>: %w", r.URL.Path, errdefs.ErrInvalid))
		return
	}
	s.mux.ServeHTTP(rw, r)
}

// recordServerError keeps a 5xx answer among the daemon's last errors: it
// is the daemon's failure, not the caller's (a 4xx is the caller's).
func (s *Server) recordServerError(r *http.Request, rw *statusWriter) {
	if s.metrics == nil || rw.status < 500 {
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
	s.metrics.Errors().Record(fmt.Sprintf("%s: %d", op, rw.status), r.PathValue("id"), msg)
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
