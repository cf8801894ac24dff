package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
)

// ToolCall is the record of one tool call an agent made in a sandbox. The
// params and result themselves are not kept: a digest and sizes say what
// was asked and how much came back.
type ToolCall struct {
	ID         int64
	SandboxID  string
	Team       string
	ToolCallID string // the caller's id of the call ("" = none given)
	Tool       string
	At         time.Time
	// ParamsDigest is the hex SHA-256 of the params as sent.
	ParamsDigest string
	ParamsBytes  int
	ResultBytes  int
	Duration     time.Duration
	IsError      bool
	ExitCode     *int32 // nil: the tool has no exit code
	// Turn and SnapshotID name the turn snapshot taken after the call
	// (0 and "" when none was).
	Turn       int
	SnapshotID string
}

// maxToolCallID bounds the caller's id of a call.
const maxToolCallID = 256

// AddToolCall records a tool call and returns its id.
func (s *historyTables) AddToolCall(ctx context.Context, c ToolCall) (int64, error) {
	if err := ids.Validate("sandbox id", c.SandboxID); err != nil {
		return 0, err
	}
	if c.Tool == "" || len(c.ToolCallID) > maxToolCallID {
		return 0, fmt.Errorf("a tool call needs a tool and an id of at most %d bytes: %w", maxToolCallID, errdefs.ErrInvalid)
	}
	if c.At.IsZero() {
		c.At = time.Now()
	}
	var exit sql.NullInt32
	if c.ExitCode != nil {
		exit = sql.NullInt32{Int32: *c.ExitCode, Valid: true}
	}
	res, err := s.w.ExecContext(ctx, `INSERT INTO tool_calls
		(sandbox_id, team, tool_call_id, tool, at, params_digest, params_bytes, result_bytes, duration_ms, is_error, exit_code, turn, snapshot_id)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		c.SandboxID, c.Team, c.ToolCallID, c.Tool, toNanos(c.At), c.ParamsDigest, c.ParamsBytes, c.ResultBytes,
		c.Duration.Milliseconds(), c.IsError, exit, c.Turn, c.SnapshotID)
	if err != nil {
		return 0, fmt.Errorf("record tool call in %s: %w", c.SandboxID, dbErr(err))
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, fmt.Errorf("record tool call in %s: %w", c.SandboxID, dbErr(err))
	}
	return id, nil
}

// ListToolCalls returns a sandbox's tool calls after the one with id after
// (0 = from the first), oldest first, at most limit (0 = all).
func (s *historyTables) ListToolCalls(ctx context.Context, sandboxID string, after int64, limit int) ([]ToolCall, error) {
	return listHistory(ctx, s.conns, "tool_calls", `id, sandbox_id, team, tool_call_id, tool, at, params_digest, params_bytes,
		result_bytes, duration_ms, is_error, exit_code, turn, snapshot_id`, "tool calls",
		sandboxID, after, limit, func(rows scanner) (ToolCall, error) {
			var c ToolCall
			var at, ms int64
			var exit sql.NullInt32
			err := rows.Scan(&c.ID, &c.SandboxID, &c.Team, &c.ToolCallID, &c.Tool, &at, &c.ParamsDigest, &c.ParamsBytes,
				&c.ResultBytes, &ms, &c.IsError, &exit, &c.Turn, &c.SnapshotID)
			c.At, c.Duration = fromNanos(at), time.Duration(ms)*time.Millisecond
			if exit.Valid {
				c.ExitCode = &exit.Int32
			}
			return c, err
		})
}
