// Package mcpserver is warren's MCP server: sandbox lifecycle, the
// in-sandbox tools (bash, read, write, ...), snapshots, rollback, fork and
// diff, offered to an MCP client. It is built on the public Go client, so
// the same server backs `warren mcp` (stdio, over the CLI's client) and the
// daemon's /mcp endpoint (Streamable HTTP, over a client per caller).
package mcpserver

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/warrenhq/warren/client"
)

// instructions tell the model how the tools fit together.
const instructions = `warren runs isolated Linux sandboxes for you.
Start with sandbox_create: it answers with a sandboxId. Pass that sandboxId to the tools that work inside the sandbox: bash (run a shell command), read, write, edit, ls, glob, grep and apply_patch. Paths are inside the sandbox, never on the host.
Use snapshot to save the sandbox's files before a risky step, rollback to go back to a snapshot, fork to try several approaches in copies of a sandbox, and diff to see what changed since a snapshot. A tool call with turn: true also takes a snapshot right after it.
Call sandbox_kill when you are done with a sandbox; sandbox_list shows the ones that exist.`

// loadTimeout bounds one attempt to fetch the tool list from the daemon.
const loadTimeout = 5 * time.Second

// Option configures a server.
type Option func(*server)

// WithLogger sends the server's log to l (default: discarded). stdio
// servers must log to stderr: stdout carries the protocol.
func WithLogger(l *slog.Logger) Option {
	return func(s *server) {
		if l != nil {
			s.log = l
		}
	}
}

// withCatalog shares one cache of the daemon's tool list between servers
// (the HTTP handler builds a server per session).
func withCatalog(k *catalog) Option {
	return func(s *server) { s.cat = k }
}

// server is the state behind one mcp.Server.
type server struct {
	c   *client.Client
	mcp *mcp.Server
	cat *catalog
	log *slog.Logger

	mu sync.Mutex
	// loaded is set once the daemon's tool list replaced the fallbacks.
	loaded bool
	// warned is set once a failure to load it has been logged as a warning.
	warned bool
}

// New returns an MCP server whose tools act through c. The sandbox tools'
// parameter schemas come from the daemon (GET /tools) on the first
// tools/list or tools/call; until the daemon answers, those tools are
// listed with a minimal schema and calls are still forwarded to it.
func New(c *client.Client, version string, opts ...Option) *mcp.Server {
	s := &server{c: c, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, o := range opts {
		o(s)
	}
	if s.cat == nil {
		s.cat = &catalog{}
	}
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: "warren", Title: "warren sandboxes", Version: version},
		&mcp.ServerOptions{
			Instructions: instructions,
			Logger:       s.log,
			// No "logging" capability: this server sends no log messages.
			Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}},
		})
	s.addOwnTools()
	s.addFallbackTools()
	s.mcp.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/list" || method == "tools/call" {
				s.ensureSandboxTools(ctx)
			}
			return next(ctx, method, req)
		}
	})
	return s.mcp
}

// catalog caches the daemon's tool list once it has been fetched. The list
// is the agent's, fixed for the daemon's lifetime.
type catalog struct {
	mu    sync.Mutex
	tools []client.Tool
}

func (k *catalog) load(ctx context.Context, c *client.Client) ([]client.Tool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.tools != nil {
		return k.tools, nil
	}
	ctx, cancel := context.WithTimeout(ctx, loadTimeout)
	defer cancel()
	tools, err := c.Tools.List(ctx)
	if err != nil {
		return nil, err
	}
	if len(tools) == 0 {
		return nil, errors.New("the daemon lists no tools")
	}
	k.tools = tools
	return tools, nil
}

// ensureSandboxTools replaces the fallback sandbox tools with the daemon's
// own list, once. A failure leaves the fallbacks and is tried again on the
// next list or call.
func (s *server) ensureSandboxTools(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.loaded {
		return
	}
	tools, err := s.cat.load(ctx, s.c)
	if err != nil {
		level := slog.LevelWarn
		if s.warned {
			level = slog.LevelDebug
		}
		s.warned = true
		s.log.Log(ctx, level, "cannot fetch the tool list from warren; offering the sandbox tools without their parameter schemas", "err", err)
		return
	}
	s.installSandboxTools(tools)
	s.loaded = true
}
