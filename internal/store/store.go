// Package store keeps warren's metadata (sandboxes, templates, API keys) in
// SQLite.
//
// The database is one file, <data-dir>/warren.db, in WAL mode. The filesystem
// and the runtime stay the truth for what exists; this is the record the
// daemon reconciles against them on start.
//
// Connections: every write goes through one connection (SQLite allows one
// writer at a time anyway, and serialising writers in Go means this process
// never sees SQLITE_BUSY from itself), and reads go through a small pool of
// query-only connections, which WAL lets run alongside the writer. Another
// process on the same file (say, a CLI) is covered by a 5 s busy timeout and
// by write transactions that take the write lock up front (BEGIN IMMEDIATE),
// so a reader never has to upgrade to a writer midway and deadlock.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/warrenhq/warren/internal/errdefs"
)

// busyTimeout is how long a statement waits for another process's lock
// before failing with SQLITE_BUSY.
const busyTimeout = 5 * time.Second

// readConns bounds the read pool; two cores make more pointless.
const readConns = 4

// Store is the metadata database. It is safe for concurrent use. Its
// methods live on one type per table or job, each sharing the connections:
// sandboxTable (sandboxes.go, sandbox_lineage.go, the policy in network.go),
// snapshotTable (snapshots.go), historyTables (events, lineage edges and
// tool calls: events.go, lineage.go, toolcalls.go), templateTable
// (templates.go), networkEventTable (network.go), keyTable (keys.go) and
// teamTable (teams.go), volumeTable (volumes.go), secretTable (secrets.go)
// and usernsTable (userns.go), deviceTable (devices.go).
type Store struct {
	*conns
	sandboxTable
	snapshotTable
	historyTables
	templateTable
	networkEventTable
	keyTable
	teamTable
	volumeTable
	secretTable
	usernsTable
	deviceTable
	templateBuildTable
}

// conns are the database's connections, shared by every table's type.
type conns struct {
	w *stmtDB // the one writer connection
	r *stmtDB // query-only readers
	// sealer seals SOCKS5 passwords in sandboxes' network policies (nil:
	// kept as given); set once, before the store is used.
	sealer NetworkSealer
}

// The tables' types: each holds the shared connections and the methods of
// its table.
type (
	sandboxTable       struct{ *conns }
	snapshotTable      struct{ *conns }
	historyTables      struct{ *conns }
	templateTable      struct{ *conns }
	networkEventTable  struct{ *conns }
	keyTable           struct{ *conns }
	volumeTable        struct{ *conns }
	secretTable        struct{ *conns }
	usernsTable        struct{ *conns }
	deviceTable        struct{ *conns }
	templateBuildTable struct{ *conns } // templatebuilds.go
)

func newStore(c *conns) *Store {
	return &Store{
		conns:              c,
		sandboxTable:       sandboxTable{c},
		snapshotTable:      snapshotTable{c},
		historyTables:      historyTables{c},
		templateTable:      templateTable{c},
		networkEventTable:  networkEventTable{c},
		teamTable:          teamTable{c},
		keyTable:           keyTable{c},
		volumeTable:        volumeTable{c},
		secretTable:        secretTable{c},
		usernsTable:        usernsTable{c},
		deviceTable:        deviceTable{c},
		templateBuildTable: templateBuildTable{c},
	}
}

// Open opens (creating if needed) the database at path and brings its schema
// up to date. The file's directory must exist.
func Open(ctx context.Context, path string) (*Store, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("metadata database path %q: %w", path, errdefs.ErrInvalid)
	}
	// Create the file ourselves so that it is private to the daemon: it holds
	// the env vars users pass to sandboxes (often secrets) and the API key
	// hashes. SQLite gives the -wal and -shm files the same mode.
	f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open metadata database %s (does the data directory exist and is it writable?): %w", abs, err)
	}
	f.Close()

	// synchronous=NORMAL in WAL mode: a commit reaches the OS at once (a
	// daemon killed with -9 loses nothing) but is synced to disk at
	// checkpoints, not at every commit. A power cut can lose the last
	// commits, never corrupt the database; the sandboxes themselves do not
	// survive a power cut, and the next start reconciles records with what
	// is there. It makes a commit ~10× cheaper (a warm-pool claim writes 3).
	w, err := openPool(ctx, abs, 1, "_txlock=immediate&_pragma=synchronous(NORMAL)")
	if err != nil {
		return nil, err
	}
	if err := migrate(ctx, w); err != nil {
		w.Close()
		return nil, fmt.Errorf("metadata database %s: %w", abs, err)
	}
	r, err := openPool(ctx, abs, readConns, "_pragma=query_only(1)")
	if err != nil {
		w.Close()
		return nil, err
	}
	return newStore(&conns{w: newStmtDB(w), r: newStmtDB(r)}), nil
}

func openPool(ctx context.Context, abs string, conns int, extra string) (*sql.DB, error) {
	q := fmt.Sprintf("_pragma=busy_timeout(%d)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&%s",
		busyTimeout.Milliseconds(), extra)
	// A file: URI with the path escaped, so that '?', '#' or '%' in the data
	// directory's name cannot be read as URI syntax.
	dsn := (&url.URL{Scheme: "file", Path: abs, RawQuery: q}).String()
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open metadata database %s: %w", abs, err)
	}
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open metadata database %s: %w", abs, dbErr(err))
	}
	return db, nil
}

// Close closes the database. Calls in flight fail.
func (s *Store) Close() error {
	return errors.Join(s.r.Close(), s.w.Close())
}

// writeTx runs fn in a write transaction (BEGIN IMMEDIATE) on the writer
// connection and commits it if fn returns nil.
//
// fn's statements get ctx without its cancellation: the driver watches a
// cancellable context with a goroutine per statement (~10 µs each, three
// or four per transaction on a create's path), and it would buy nothing
// here. The lock wait is in BEGIN, which keeps ctx; the statements after it
// wait for nobody; and the transaction still ends with ctx (database/sql
// rolls it back and its next statement or Commit fails).
func (s *conns) writeTx(ctx context.Context, fn func(ctx context.Context, tx *stmtTx) error) error {
	sqlTx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return dbErr(err)
	}
	tx := &stmtTx{Tx: sqlTx, db: s.w}
	defer tx.prepareMissed(context.WithoutCancel(ctx))
	if err := fn(context.WithoutCancel(ctx), tx); err != nil {
		tx.Rollback()
		return err
	}
	return dbErr(tx.Commit())
}

// dbErr gives a database error the errdefs kind a caller can act on. The
// caller adds what it was doing.
func dbErr(err error) error {
	if err == nil {
		return nil
	}
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return err
	}
	switch se.Code() {
	case sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY, sqlite3.SQLITE_CONSTRAINT_UNIQUE:
		return fmt.Errorf("%w: %w", errdefs.ErrAlreadyExists, err)
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return fmt.Errorf("metadata database is locked by another process, retry: %w: %w", errdefs.ErrUnavailable, err)
	case sqlite3.SQLITE_FULL:
		return fmt.Errorf("disk holding the metadata database is full: %w: %w", errdefs.ErrResourceExhausted, err)
	case sqlite3.SQLITE_CONSTRAINT:
		return fmt.Errorf("%w: %w", errdefs.ErrInvalid, err)
	}
	return err
}

// Times are stored as Unix nanoseconds in UTC, 0 meaning "not set", so they
// sort and compare as integers and round-trip exactly.
func toNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}
