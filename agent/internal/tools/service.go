// Package tools serves warren.agent.v1.ToolsService: the typed tools an AI
// agent calls inside the sandbox — bash, read, write, edit, ls, glob, grep
// and apply_patch — each with a JSON Schema for its params.
//
// Like the E2B file service, the agent acts as root on behalf of a sandbox
// user: relative paths resolve against that user's home (or the call's cwd),
// files and directories the tools create belong to the user, files they
// change keep their owner and mode, and bash runs with the user's
// credentials.
package tools

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"time"

	"connectrpc.com/connect"

	"github.com/warrenhq/warren/agent/internal/reaper"
	"github.com/warrenhq/warren/agent/internal/users"
	"github.com/warrenhq/warren/api/gen/warren/agent/v1/agentv1connect"
)

// Config is what the service needs to know about the sandbox.
type Config struct {
	Users users.DB // the sandbox's accounts
	// Reaper waits for bash's children: as PID 1 the agent must never wait
	// for a child itself (see package reaper).
	Reaper *reaper.Reaper
	Log    *slog.Logger // nil: discard
}

// Service implements agentv1connect.ToolsServiceHandler.
type Service struct {
	cfg   Config
	log   *slog.Logger
	tools map[string]*tool
	names []string // sorted
}

var _ agentv1connect.ToolsServiceHandler = (*Service)(nil)

// New makes the service.
func New(cfg Config) *Service {
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Service{cfg: cfg, log: log, tools: map[string]*tool{}}
	for _, t := range catalogue() {
		s.tools[t.name] = t
		s.names = append(s.names, t.name)
	}
	sort.Strings(s.names)
	return s
}

// Handle mounts the service on mux.
func (s *Service) Handle(mux *http.ServeMux, opts ...connect.HandlerOption) {
	mux.Handle(agentv1connect.NewToolsServiceHandler(s, opts...))
}

// Request is one tool call.
type Request struct {
	Tool   string
	Params []byte // a JSON object; empty means {}
	User   string // name or uid; "" is the sandbox's default user
	Cwd    string // base of relative paths; "" is the user's home
}

// Run runs one tool call. progress, when not nil, receives bash's output as
// it comes. The error is a Connect error for a call that is wrong in itself
// (unknown tool or user, params that do not fit the schema); everything a
// tool finds wrong is in the Result.
func (s *Service) Run(ctx context.Context, req Request, progress func([]byte)) (Result, error) {
	start := time.Now()
	t, found := s.tools[req.Tool]
	if !found {
		return Result{}, connect.NewError(connect.CodeNotFound,
			fmt.Errorf("no tool %q; the tools are: %s", req.Tool, strings.Join(s.names, ", ")))
	}
	params, err := check(t.name, t.params, req.Params)
	if err != nil {
		return Result{}, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("tool %s: %w", t.name, err))
	}
	c, err := s.newCall(req, progress)
	if err != nil {
		return Result{}, err
	}
	res, err := t.run(ctx, c, params)
	if err != nil {
		return Result{}, connect.NewError(connect.CodeInternal, err)
	}
	if err := ctx.Err(); err != nil {
		return Result{}, connect.NewError(connect.CodeCanceled, err)
	}
	res.Content = strings.ToValidUTF8(res.Content, "\uFFFD")
	res.Duration = time.Since(start)
	s.log.Debug("tool call", "tool", t.name, "user", c.user.Name, "is_error", res.IsError, "duration", res.Duration)
	return res, nil
}

// newCall resolves the acting user and the base directory of relative paths.
func (s *Service) newCall(req Request, progress func([]byte)) (*call, error) {
	if strings.IndexByte(req.User, 0) >= 0 || strings.IndexByte(req.Cwd, 0) >= 0 {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("user and cwd must not contain NUL bytes"))
	}
	u, err := s.cfg.Users.Lookup(req.User)
	if err != nil {
		if errors.Is(err, users.ErrUnknown) {
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("user %q does not exist in the sandbox", req.User))
		}
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("look up user %q: %w", req.User, err))
	}
	c := &call{user: u, dir: u.Home, progress: progress, reaper: s.cfg.Reaper}
	if req.Cwd != "" {
		dir, err := c.abs(req.Cwd)
		if err != nil {
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("cwd: %w", err))
		}
		c.dir = dir
	}
	return c, nil
}
