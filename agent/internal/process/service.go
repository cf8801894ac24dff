// Package process serves warren.agent.v1.ProcessService: it runs commands
// inside the sandbox and streams their output back to the daemon. It also
// serves E2B's process.Process (envd.go) over the same processes.
package process

import (
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/agent/internal/initproc"
	"github.com/warrenhq/warren/agent/internal/reaper"
	"github.com/warrenhq/warren/agent/internal/users"
	"github.com/warrenhq/warren/api/gen/warren/agent/v1/agentv1connect"
)

// DefaultOutputLimit caps the output one command sends back when the request
// names no limit.
const DefaultOutputLimit = 16 << 20

// DefaultPath is the PATH a command gets unless its request sets one.
const DefaultPath = initproc.DefaultPath

// Config is what the service needs to know about the sandbox.
type Config struct {
	Workspace string   // default working directory
	Users     users.DB // the sandbox's accounts
	Version   string   // reported by Ping
	Log       *slog.Logger
}

// Service implements agentv1connect.ProcessServiceHandler.
type Service struct {
	cfg     Config
	reaper  *reaper.Reaper
	reg     *registry  // background processes
	startMu sync.Mutex // serialises Start (tag uniqueness)
	// following counts the streams that end with a process's exit event
	// (Exec, E2B's Start and Connect): a stopping agent waits for them so
	// that their clients learn the exit code rather than see a cut stream.
	following atomic.Int64
}

var _ agentv1connect.ProcessServiceHandler = (*Service)(nil)

// New makes the service. Every child it starts is waited for through r.
func New(cfg Config, r *reaper.Reaper) *Service {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Service{cfg: cfg, reaper: r, reg: newRegistry()}
}

// Handle mounts the service on mux.
func (s *Service) Handle(mux *http.ServeMux, opts ...connect.HandlerOption) {
	mux.Handle(agentv1connect.NewProcessServiceHandler(s, opts...))
}

// Following reports how many streams are still to send a process's exit.
func (s *Service) Following() int { return int(s.following.Load()) }

// follows marks a stream as owing a process's exit; call the result when
// the handler returns.
func (s *Service) follows() func() {
	s.following.Add(1)
	return func() { s.following.Add(-1) }
}
