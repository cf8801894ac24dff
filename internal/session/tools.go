package session

import (
	"context"

	"github.com/warrenhq/warren/internal/store"
)

// RecordToolCall keeps the record of a tool call made in a sandbox. It is
// best effort, like events: the call itself happened.
func (h *history) RecordToolCall(ctx context.Context, c store.ToolCall) int64 {
	id, err := h.store.AddToolCall(context.WithoutCancel(ctx), c)
	if err != nil {
		h.log.Warn("record tool call", "sandbox", c.SandboxID, "tool", c.Tool, "err", err)
	}
	return id
}

// ToolCalls returns a team's sandbox's tool calls after record id after.
func (h *history) ToolCalls(ctx context.Context, team, id string, after int64, limit int) ([]store.ToolCall, error) {
	if _, err := h.Get(ctx, team, id); err != nil {
		return nil, err
	}
	return h.store.ListToolCalls(ctx, id, after, limit)
}
