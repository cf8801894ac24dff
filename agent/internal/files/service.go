// Package files serves warren.agent.v1.FilesService: file operations done by
// the agent inside the sandbox, so every path is the sandbox's own.
package files

import (
	"net/http"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/agent/internal/users"
	"github.com/warrenhq/warren/api/gen/warren/agent/v1/agentv1connect"
)

const (
	// readChunk bounds one ReadFile data message.
	readChunk = 1 << 20
	// MaxWriteBytes bounds one WriteFile.
	MaxWriteBytes = 1 << 30
	// maxListEntries bounds one ListDir answer so it fits the daemon's
	// message limit.
	maxListEntries = 20000
)

// Config is what the service needs to know about the sandbox.
type Config struct {
	Workspace string   // relative paths resolve against it
	Users     users.DB // owners of written files
}

// Service implements agentv1connect.FilesServiceHandler.
type Service struct {
	cfg Config
}

var _ agentv1connect.FilesServiceHandler = (*Service)(nil)

// New makes the service.
func New(cfg Config) *Service { return &Service{cfg: cfg} }

// Handle mounts the service on mux.
func (s *Service) Handle(mux *http.ServeMux, opts ...connect.HandlerOption) {
	mux.Handle(agentv1connect.NewFilesServiceHandler(s, opts...))
}
