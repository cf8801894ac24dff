package store

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/warrenhq/warren/internal/errdefs"
)

func TestSandboxLineageFields(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	if err := s.CreateSandbox(ctx, testSandbox("root1")); err != nil {
		t.Fatal(err)
	}
	fork := testSandbox("fork1")
	fork.Family, fork.ForkedFrom, fork.ParentSandbox, fork.Head = "root1", "snap1", "root1", "snap1"
	if err := s.CreateSandbox(ctx, fork); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateSandbox(ctx, testSandbox("other")); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetSandbox(ctx, "root1")
	if err != nil || got.Family != "root1" || got.ForkedFrom != "" || got.Head != "" || got.Turn != 0 {
		t.Errorf("fresh sandbox lineage = %+v, %v; want Family = its id and the rest empty", got, err)
	}
	fam, err := s.ListSandboxes(ctx, SandboxFilter{Family: "root1"})
	if err != nil || len(fam) != 2 || fam[0].ID != "root1" || fam[1].ID != "fork1" {
		t.Errorf("family root1 = %v, %v; want root1, fork1", sandboxIDs(fam), err)
	}
	if _, err := s.ListSandboxes(ctx, SandboxFilter{Family: "Bad/"}); !errdefs.IsInvalid(err) {
		t.Errorf("bad family filter: %v, want ErrInvalid", err)
	}

	if err := s.SetSandboxHead(ctx, "fork1", "snap2"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetSandbox(ctx, "fork1"); got.Head != "snap2" {
		t.Errorf("Head = %q, want snap2", got.Head)
	}
	if err := s.SetSandboxHead(ctx, "fork1", ""); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetSandbox(ctx, "fork1"); got.Head != "" {
		t.Errorf("Head = %q after clearing, want empty", got.Head)
	}
	if err := s.SetSandboxHead(ctx, "nope", "snap2"); !errdefs.IsNotFound(err) {
		t.Errorf("SetSandboxHead of a missing sandbox: %v, want ErrNotFound", err)
	}
	if err := s.SetSandboxHead(ctx, "fork1", "../x"); !errdefs.IsInvalid(err) {
		t.Errorf("SetSandboxHead with a bad id: %v, want ErrInvalid", err)
	}

	// Forks of snap1: fork1, plus one more that is later destroyed.
	f2 := fork
	f2.ID = "fork2"
	if err := s.CreateSandbox(ctx, f2); err != nil {
		t.Fatal(err)
	}
	if n, err := s.CountForksOf(ctx, "snap1"); err != nil || n != 2 {
		t.Errorf("CountForksOf(snap1) = %d, %v; want 2", n, err)
	}
	if err := s.UpdateSandboxState(ctx, "fork2", nil, StateDestroyed, ""); err != nil {
		t.Fatal(err)
	}
	if n, err := s.CountForksOf(ctx, "snap1"); err != nil || n != 1 {
		t.Errorf("CountForksOf(snap1) after destroying one = %d, %v; want 1", n, err)
	}
	if n, err := s.CountForksOf(ctx, "snap9"); err != nil || n != 0 {
		t.Errorf("CountForksOf(snap9) = %d, %v; want 0", n, err)
	}
}

func TestNextTurnConcurrent(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	if err := s.CreateSandbox(ctx, testSandbox("sb1")); err != nil {
		t.Fatal(err)
	}
	const n = 16
	turns := make([]int, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { turns[i], errs[i] = s.NextTurn(ctx, "sb1") })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(turns)
	for i, tn := range turns {
		if tn != i+1 {
			t.Fatalf("turns handed out = %v, want 1..%d each once", turns, n)
		}
	}
	if got, _ := s.GetSandbox(ctx, "sb1"); got.Turn != n {
		t.Errorf("stored Turn = %d, want %d", got.Turn, n)
	}
	if _, err := s.NextTurn(ctx, "nope"); !errdefs.IsNotFound(err) {
		t.Errorf("NextTurn of a missing sandbox: %v, want ErrNotFound", err)
	}
}

// oldSchemaVersion is the schema before lineage: what databases made by
// the first release hold.
const oldSchemaVersion = 7

func TestMigrateFromOldSchema(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "warren.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range migrations[:oldSchemaVersion] {
		if _, err := db.Exec(m); err != nil {
			db.Close()
			t.Fatalf("old migration %d: %v", i+1, err)
		}
	}
	_, err = db.Exec(fmt.Sprintf(`PRAGMA user_version = %d`, oldSchemaVersion))
	if err == nil {
		_, err = db.Exec(`INSERT INTO sandboxes (id, team, template, runtime, state, created_at, updated_at)
			VALUES ('old1', 'default', 'base', 'native', 'running', 1, 1)`)
	}
	if err == nil {
		_, err = db.Exec(`INSERT INTO templates (name, source, created_at) VALUES ('base', 'busybox', 1)`)
	}
	db.Close()
	if err != nil {
		t.Fatal(err)
	}

	s, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("Open of a version %d database: %v", oldSchemaVersion, err)
	}
	defer s.Close()
	got, err := s.GetSandbox(ctx, "old1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Family != "old1" || got.ForkedFrom != "" || got.ParentSandbox != "" || got.Head != "" ||
		got.Turn != 0 || got.QuotaBytes != 0 || got.State != StateRunning {
		t.Errorf("migrated sandbox = %+v; want Family old1 and empty lineage", got)
	}
	// A template built before templates could require a runtime requires none.
	if tm, err := s.GetTemplate(ctx, "base"); err != nil || tm.Runtime != "" || tm.Source != "busybox" {
		t.Errorf("migrated template = %+v, %v; want source busybox, no runtime", tm, err)
	}
	if n, err := s.NextTurn(ctx, "old1"); err != nil || n != 1 {
		t.Errorf("NextTurn on a migrated sandbox = %d, %v; want 1", n, err)
	}
	if err := s.CreateSnapshot(ctx, testSnapshot("snap1", "old1")); err != nil {
		t.Errorf("CreateSnapshot after migration: %v", err)
	}
}

func sandboxIDs(l []Sandbox) []string {
	var out []string
	for _, sb := range l {
		out = append(out, sb.ID)
	}
	return out
}
