package tplbuild

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/warrenhq/warren/client"
	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/store"
)

// readyTimeout bounds how long a start command may take to be ready, in
// a build and in a create.
const readyTimeout = 2 * time.Minute

// readyPoll is how often the ready command is tried.
const readyPoll = 100 * time.Millisecond

// readyTryMs bounds one try of a ready command: 10 s, so that a check
// that hangs (a URL not answering yet) is tried again; but waitForTimeout's
// `sleep N` (a Dockerfile CMD's ready command) must be let finish.
func readyTryMs(ctx context.Context, readyCmd string) uint32 {
	if !strings.HasPrefix(readyCmd, "sleep ") {
		return 10_000
	}
	left := readyTimeout
	if dl, ok := ctx.Deadline(); ok {
		left = time.Until(dl)
	}
	return uint32(max(1, left.Milliseconds()))
}

// startTag is the background process tag of a template's start command.
const startTag = "template-start"

// Start runs a built template's start command in a sandbox just made
// from it and waits for its ready command: a create answers once the
// server is up. (Each start runs it: the snapshot keeps files, not
// processes.) A build without a start command does nothing.
func (s *Service) Start(ctx context.Context, team, sandboxID string, b store.TemplateBuild) error {
	if b.StartCmd == "" {
		return nil
	}
	return s.startAndWait(ctx, team, sandboxID, b.StartCmd, b.ReadyCmd, b.User, b.Workdir, nil)
}

func (s *Service) startAndWait(ctx context.Context, team, sandboxID, startCmd, readyCmd, user, workdir string, env map[string]string) error {
	if user == "" {
		user = defaultUser
	}
	if workdir == "" {
		workdir = defaultWorkdir
	}
	req := client.StartProcessRequest{Tag: startTag, ExecRequest: client.ExecRequest{Command: startCmd, User: user, Cwd: workdir, Env: env}}
	if _, err := s.cfg.Commands.StartProcess(ctx, team, sandboxID, req); err != nil {
		return fmt.Errorf("start command %q: %w", startCmd, err)
	}
	if readyCmd == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	last := ""
	for {
		res, err := s.cfg.Commands.ExecWait(ctx, team, sandboxID, client.ExecRequest{Command: readyCmd, User: user, Cwd: workdir, Env: env, TimeoutMs: readyTryMs(ctx, readyCmd)})
		if err == nil && res.ExitCode == 0 && res.Signal == "" && !res.TimedOut {
			return nil
		}
		if err == nil {
			last = tail(res.Stdout+res.Stderr, 500)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("ready command %q did not succeed within %s (last output: %s): %w", readyCmd, readyTimeout, last, errdefs.ErrUnavailable)
		case <-time.After(readyPoll):
		}
	}
}
