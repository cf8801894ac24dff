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

// TestStmtCacheWriteTx: a write transaction's statements run unprepared the
// first time, are prepared after it, and run prepared in the next one.
func TestStmtCacheWriteTx(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	const q = `UPDATE sandboxes SET state = ? WHERE id = ?`
	run := func() {
		err := s.writeTx(ctx, func(ctx context.Context, tx *stmtTx) error {
			_, err := tx.ExecContext(ctx, q, "running", "none")
			if len(tx.missed) > 0 && s.w.cached(q) != nil {
				t.Error("a cached statement counted as missed")
			}
			return err
		})
		if err != nil {
			t.Fatalf("writeTx: %v", err)
		}
	}
	run()
	if s.w.cached(q) == nil {
		t.Fatal("statement not prepared after its transaction")
	}
	run()
}
