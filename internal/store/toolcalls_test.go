package store

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
)

func TestToolCalls(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	code := int32(3)
	for _, c := range []ToolCall{
		{SandboxID: "sb1", Team: "a", ToolCallID: "toolu_1", Tool: "bash", ParamsDigest: "ab", ParamsBytes: 20, ResultBytes: 5, Duration: 12 * time.Millisecond, IsError: true, ExitCode: &code, Turn: 4, SnapshotID: "snap1"},
		{SandboxID: "sb1", Team: "a", Tool: "read", ParamsDigest: "cd"},
		{SandboxID: "sb2", Team: "a", Tool: "ls"},
	} {
		if _, err := s.AddToolCall(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	calls, err := s.ListToolCalls(ctx, "sb1", 0, 0)
	if err != nil || len(calls) != 2 {
		t.Fatalf("%+v %v", calls, err)
	}
	c := calls[0]
	if c.ToolCallID != "toolu_1" || c.Tool != "bash" || c.Duration != 12*time.Millisecond || !c.IsError || c.ExitCode == nil || *c.ExitCode != 3 ||
		c.Turn != 4 || c.SnapshotID != "snap1" || c.ParamsBytes != 20 || c.ResultBytes != 5 || c.At.IsZero() {
		t.Fatalf("round trip: %+v", c)
	}
	if calls[1].ExitCode != nil || calls[1].Tool != "read" {
		t.Fatalf("second: %+v", calls[1])
	}
	if more, _ := s.ListToolCalls(ctx, "sb1", calls[0].ID, 1); len(more) != 1 || more[0].Tool != "read" {
		t.Fatalf("after: %+v", more)
	}
	if _, err := s.AddToolCall(ctx, ToolCall{SandboxID: "BAD/ID", Tool: "x"}); !errdefs.IsInvalid(err) {
		t.Fatalf("bad id: %v", err)
	}
	if _, err := s.AddToolCall(ctx, ToolCall{SandboxID: "sb1", Tool: "x", ToolCallID: strings.Repeat("i", 300)}); !errdefs.IsInvalid(err) {
		t.Fatalf("long call id: %v", err)
	}
	if _, err := s.AddToolCall(ctx, ToolCall{SandboxID: "sb1"}); !errdefs.IsInvalid(err) {
		t.Fatalf("no tool: %v", err)
	}
}
