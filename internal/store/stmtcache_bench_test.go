package store

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// BenchmarkSandboxCycle times the store calls of one sandbox's life on a
// create's hot path: insert, read back, two state changes, delete.
func BenchmarkSandboxCycle(b *testing.B) {
	ctx := context.Background()
	s, err := Open(ctx, b.TempDir()+"/warren.db")
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	now := time.Now()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := fmt.Sprintf("sb%d", i)
		sb := Sandbox{ID: id, Team: "acme", Template: "base", Runtime: "runc", State: StateCreating,
			Metadata: map[string]string{"k": "v"}, CreatedAt: now, EndAt: now.Add(time.Hour)}
		if err := s.CreateSandbox(ctx, sb); err != nil {
			b.Fatal(err)
		}
		if _, err := s.GetSandbox(ctx, id); err != nil {
			b.Fatal(err)
		}
		if err := s.UpdateSandboxState(ctx, id, []SandboxState{StateCreating}, StateRunning, ""); err != nil {
			b.Fatal(err)
		}
		if _, err := s.GetSandbox(ctx, id); err != nil {
			b.Fatal(err)
		}
		if err := s.DeleteSandbox(ctx, id); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGetSandbox times one read of a sandbox's record.
func BenchmarkGetSandbox(b *testing.B) {
	ctx := context.Background()
	s, err := Open(ctx, b.TempDir()+"/warren.db")
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	sb := Sandbox{ID: "sb1", Team: "acme", Template: "base", Runtime: "runc", State: StateRunning,
		CreatedAt: time.Now(), EndAt: time.Now().Add(time.Hour)}
	if err := s.CreateSandbox(ctx, sb); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.GetSandbox(ctx, "sb1"); err != nil {
			b.Fatal(err)
		}
	}
}
