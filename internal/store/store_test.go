package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
)

func openTest(t *testing.T) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "warren.db")
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

func testSandbox(id string) Sandbox {
	return Sandbox{ID: id, Team: "default", Template: "base", Runtime: "native", State: StateCreating}
}

func TestOpenSetsUpDatabase(t *testing.T) {
	s, path := openTest(t)
	ctx := context.Background()
	var mode string
	if err := s.r.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode = %q, %v; want wal", mode, err)
	}
	for _, db := range []struct {
		name string
		q    func(string, any) error
	}{
		{"writer", func(q string, v any) error { return s.w.QueryRowContext(ctx, q).Scan(v) }},
		{"reader", func(q string, v any) error { return s.r.QueryRowContext(ctx, q).Scan(v) }},
	} {
		var fk, busy int
		if err := db.q(`PRAGMA foreign_keys`, &fk); err != nil || fk != 1 {
			t.Errorf("%s: foreign_keys = %d, %v; want 1", db.name, fk, err)
		}
		if err := db.q(`PRAGMA busy_timeout`, &busy); err != nil || busy != 5000 {
			t.Errorf("%s: busy_timeout = %d, %v; want 5000", db.name, busy, err)
		}
	}
	var v int
	if err := s.w.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&v); err != nil || v != SchemaVersion() {
		t.Errorf("user_version = %d, %v; want %d", v, err, SchemaVersion())
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("database mode = %v, want 0600", fi.Mode().Perm())
	}
	// Readers cannot write, so a write sent to the wrong pool fails loudly.
	if _, err := s.r.ExecContext(ctx, `DELETE FROM templates`); err == nil {
		t.Error("write through the read pool succeeded")
	}
}

func TestOpenOddPath(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a b?c#d%e")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	s, err := Open(context.Background(), filepath.Join(dir, "warren.db"))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	if _, err := os.Stat(filepath.Join(dir, "warren.db")); err != nil {
		t.Errorf("database not at the path given: %v", err)
	}
}

func TestOpenMissingDir(t *testing.T) {
	_, err := Open(context.Background(), filepath.Join(t.TempDir(), "nope", "warren.db"))
	if err == nil {
		t.Fatal("Open in a missing directory succeeded")
	}
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	s, path := openTest(t)
	if _, err := s.w.Exec(fmt.Sprintf(`PRAGMA user_version = %d`, SchemaVersion()+1)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err := Open(context.Background(), path)
	if !errdefs.IsUnsupported(err) {
		t.Fatalf("Open of a newer schema: %v, want ErrUnsupported", err)
	}
}

func TestReopenKeepsData(t *testing.T) {
	ctx := context.Background()
	s, path := openTest(t)
	sb := testSandbox("sb1")
	sb.Metadata = map[string]string{"k": "v"}
	if err := s.CreateSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	if err := s.PutTemplate(ctx, Template{Name: "base", Source: "busybox", SizeBytes: 2 << 20}); err != nil {
		t.Fatal(err)
	}
	plain, _, err := s.CreateAPIKey(ctx, "default", "ci")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	s2, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s2.Close()
	got, err := s2.GetSandbox(ctx, "sb1")
	if err != nil || got.Metadata["k"] != "v" {
		t.Errorf("sandbox after reopen: %+v, %v", got, err)
	}
	if _, err := s2.GetTemplate(ctx, "base"); err != nil {
		t.Errorf("template after reopen: %v", err)
	}
	if _, err := s2.AuthenticateKey(ctx, plain); err != nil {
		t.Errorf("key after reopen: %v", err)
	}
}

func TestClosedStoreFails(t *testing.T) {
	s, _ := openTest(t)
	s.Close()
	if _, err := s.GetSandbox(context.Background(), "x"); err == nil || errdefs.IsNotFound(err) {
		t.Errorf("Get on a closed store: %v, want a non-NotFound error", err)
	}
}

func TestConcurrentWriters(t *testing.T) {
	ctx := context.Background()
	s, _ := openTest(t)
	const workers, each = 8, 50
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				id := fmt.Sprintf("w%di%d", w, i)
				if err := s.CreateSandbox(ctx, testSandbox(id)); err != nil {
					errs <- err
					continue
				}
				// Mix in reads and CAS updates so readers run beside the writer.
				if _, err := s.GetSandbox(ctx, id); err != nil {
					errs <- err
				}
				if err := s.UpdateSandboxState(ctx, id, []SandboxState{StateCreating}, StateRunning, ""); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	n, err := s.CountSandboxes(ctx, StateRunning)
	if err != nil || n != workers*each {
		t.Errorf("CountSandboxes = %d, %v; want %d", n, err, workers*each)
	}
	t.Logf("%d creates + gets + CAS updates in %v", workers*each, time.Since(start))
}

// Two Stores on one file stand for the daemon and a CLI: they contend for
// SQLite's lock, and the busy timeout plus BEGIN IMMEDIATE must absorb it.
func TestConcurrentProcessesShareFile(t *testing.T) {
	ctx := context.Background()
	a, path := openTest(t)
	b, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 400)
	for w, s := range []*Store{a, b, a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				id := fmt.Sprintf("p%di%d", w, i)
				if err := s.CreateSandbox(ctx, testSandbox(id)); err != nil {
					errs <- err
				}
				if err := s.UpdateSandboxState(ctx, id, nil, StateRunning, ""); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n, err := b.CountSandboxes(ctx); err != nil || n != 100 {
		t.Errorf("CountSandboxes = %d, %v; want 100", n, err)
	}
}
