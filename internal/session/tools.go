package session

import (
	"context"

	"github.com/warrenhq/warren/internal/store"
)

// RecordToolCall keeps the record of a tool call made in a sandbox. It is
// best effort, like events: the call itself happened.
func (m *Manager) RecordToolCall(ctx context.Context, c store.ToolCall) int64 {
	id, err := m.store.AddToolCall(context.WithoutCancel(ctx), c)
	if err != nil {
		m.log.Warn("record tool call", "sandbox", c.SandboxID, "tool", c.Tool, "err", err)
	}
	return id
}

// ToolCalls returns a team's sandbox's tool calls after record id after.
func (m *Manager) ToolCalls(ctx context.Context, team, id string, after int64, limit int) ([]store.ToolCall, error) {
	if _, err := m.Get(ctx, team, id); err != nil {
		return nil, err
	}
	return m.store.ListToolCalls(ctx, id, after, limit)
}
