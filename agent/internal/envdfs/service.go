// Package envdfs serves the file half of E2B's in-sandbox daemon (envd) as
// the unmodified E2B SDKs call it: the filesystem.Filesystem Connect service
// (stat, list, make, move, remove, watch) and the plain-HTTP routes
// GET /files (download), POST /files (upload) and GET /health.
//
// The daemon has already checked the caller's access token and forwards the
// request unchanged; the caller picks the sandbox user to act as (Basic auth
// or the `username` query). Like envd, the agent acts as root and gives what
// it creates to that user: relative paths resolve against the user's home,
// and new files and directories belong to the user.
package envdfs

import (
	"log/slog"
	"net/http"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/agent/internal/users"
	"github.com/warrenhq/warren/api/gen/filesystem/filesystemconnect"
)

const (
	// maxListEntries bounds one ListDir answer, so a deep listing of / cannot
	// exhaust the agent's memory.
	maxListEntries = 100_000
	// maxPollWatchers bounds the polling watchers alive at once: each holds
	// an inotify instance, and the kernel allows few per user.
	maxPollWatchers = 64
	// maxQueuedEvents bounds the events a polling watcher keeps between polls.
	maxQueuedEvents = 10_000
	// defaultWatcherIdle is how long a polling watcher lives unpolled before
	// it is removed, so a client that went away does not leak it.
	defaultWatcherIdle = 10 * time.Minute
	// defaultKeepalive is the keepalive interval of a WatchDir stream whose
	// client did not ask for one.
	defaultKeepalive = 60 * time.Second
)

// Config is what the service needs to know about the sandbox.
type Config struct {
	Users users.DB     // accounts: the acting user, its home, owner names
	Log   *slog.Logger // nil: discard
	// WatcherIdle is how long an unpolled polling watcher survives; zero
	// means defaultWatcherIdle.
	WatcherIdle time.Duration
}

// Service implements filesystemconnect.FilesystemHandler and envd's /files
// and /health routes.
type Service struct {
	cfg Config
	log *slog.Logger

	mu       sync.Mutex
	watchers map[string]*pollWatcher
}

var _ filesystemconnect.FilesystemHandler = (*Service)(nil)

// New makes the service.
func New(cfg Config) *Service {
	if cfg.WatcherIdle <= 0 {
		cfg.WatcherIdle = defaultWatcherIdle
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{cfg: cfg, log: log, watchers: map[string]*pollWatcher{}}
}

// Handle mounts the Connect service and the plain-HTTP routes on mux.
func (s *Service) Handle(mux *http.ServeMux, opts ...connect.HandlerOption) {
	mux.Handle(filesystemconnect.NewFilesystemHandler(s, opts...))
	mux.HandleFunc("GET /files", s.download)
	mux.HandleFunc("POST /files", s.upload)
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})
}
