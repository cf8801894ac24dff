package store

import (
	"context"
	"fmt"
	"testing"
)

// TestStmtCacheBounded: queries past the cache's bound still run (unprepared)
// and do not grow it; Close closes the statements and later calls fail.
func TestStmtCacheBounded(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	for i := 0; i < maxCachedStmts+10; i++ {
		var v int
		if err := s.r.QueryRowContext(ctx, fmt.Sprintf(`SELECT %d`, i)).Scan(&v); err != nil || v != i {
			t.Fatalf("SELECT %d = %d, %v", i, v, err)
		}
	}
	if n := len(s.r.stmts); n != maxCachedStmts {
		t.Errorf("cached statements = %d, want %d", n, maxCachedStmts)
	}
	// A statement that fails to prepare reports its error from the run.
	if _, err := s.w.ExecContext(ctx, `NOT SQL`); err == nil {
		t.Error("ExecContext(NOT SQL) succeeded")
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if len(s.r.stmts) != 0 || len(s.w.stmts) != 0 {
		t.Error("statements left after Close")
	}
	if _, err := s.GetSandbox(ctx, "sb1"); err == nil {
		t.Error("GetSandbox after Close succeeded")
	}
}
