// Package commands runs calls in sandboxes through their agents: commands
// (exec), tool calls, file calls and background processes, with the turn
// snapshot that may follow a command or a tool call. Each call is admitted
// by the session service (so pause, hibernate and rollback see it in
// flight), speaks the agent's protocol, copies output into the sandbox's
// log, and records tool calls. It knows nothing of HTTP: the API edge
// decodes a request, calls one method, and encodes the answer.
package commands

import (
	"context"
	"fmt"
	"time"

	"github.com/warrenhq/warren/internal/agentconn"
	"github.com/warrenhq/warren/internal/procs"
	"github.com/warrenhq/warren/internal/session"
	"github.com/warrenhq/warren/internal/store"
)

// Sessions is what the service needs of the session service.
type Sessions interface {
	// Get returns a team's sandbox record.
	Get(ctx context.Context, team, id string) (store.Sandbox, error)
	// Acquire admits one call into a team's running sandbox.
	Acquire(ctx context.Context, team, id string) (*agentconn.Conn, func(), error)
	// Turn takes a turn snapshot.
	Turn(ctx context.Context, team, id string) (session.SnapshotResult, error)
	// StoppedDuringCommand says how a call begun at since was cut short
	// if the sandbox stopped or restarted meanwhile (nil otherwise).
	StoppedDuringCommand(ctx context.Context, team, id string, since time.Time) error
	// RecordToolCall keeps a tool call's record.
	RecordToolCall(ctx context.Context, c store.ToolCall) int64
	// ActivityMeter keeps a sandbox from going idle while a long stream
	// to it moves bytes (nil: no idle timeout).
	ActivityMeter(id string) *session.ActivityMeter
}

// Log is where the output of commands and tool calls goes: the sandbox's
// log (*sandboxlog.Logs).
type Log interface {
	Started(id string, p procs.ProcessID, argv []string)
	Output(id string, p procs.ProcessID, stderr bool, off uint64, data []byte)
	Exited(id string, p procs.ProcessID, exit procs.Exit)
	Event(id string, level, message string)
}

// Service runs calls in sandboxes.
type Service struct {
	sessions Sessions
	logs     Log
	procs    Collectors // nil: no background processes
	// outputLimit is an exec's output cap when the request names none.
	outputLimit uint64
}

// New returns the command service.
func New(sessions Sessions, logs Log, procs Collectors, outputLimit uint64) *Service {
	return &Service{sessions: sessions, logs: logs, procs: procs, outputLimit: outputLimit}
}

// agentError is a call's broken agent stream (begun at began): how the
// sandbox stopped running if it did meanwhile (its timeout killed it, say),
// or was restarted by a rollback, else the agent's error.
func (s *Service) agentError(ctx context.Context, team, id string, began time.Time, err error) error {
	if why := s.sessions.StoppedDuringCommand(ctx, team, id, began); why != nil {
		return why
	}
	return fmt.Errorf("sandbox agent: %w", err)
}
