package store

import (
	"context"
	"database/sql"
	"errors"
	"sync"
)

// maxCachedStmts bounds a stmtDB's cache. The store's queries are constant
// strings apart from a few built per call (list filters, IN lists), whose
// variants are few too; a query past the bound runs unprepared, so a
// caller building unbounded variants cannot grow the cache (or SQLite's
// per-connection statements) without limit.
const maxCachedStmts = 256

// stmtDB is a *sql.DB whose ExecContext, QueryContext and QueryRowContext
// prepare each query string once and reuse the statement: SQLite's parse
// and plan of a statement cost about as much as running a short one, and
// the store runs the same few dozen statements over and over. database/sql
// prepares a statement again on each connection it lands on, by itself.
// Everything else (BeginTx, Close, Exec without a context) is the *sql.DB's;
// writeTx's transactions use the cache through stmtTx, the secrets' own
// transactions run unprepared statements.
type stmtDB struct {
	*sql.DB

	mu     sync.Mutex
	stmts  map[string]*sql.Stmt
	closed bool
}

func newStmtDB(db *sql.DB) *stmtDB {
	return &stmtDB{DB: db, stmts: make(map[string]*sql.Stmt)}
}

// stmt returns query's prepared statement, preparing it on first use; nil
// when the cache is full or closed (the caller runs query unprepared, and
// a failed prepare's error comes from that run instead).
func (d *stmtDB) stmt(ctx context.Context, query string) *sql.Stmt {
	d.mu.Lock()
	st, ok := d.stmts[query]
	full := d.closed || len(d.stmts) >= maxCachedStmts
	d.mu.Unlock()
	if ok || full {
		return st
	}
	// Prepared outside the lock: it may wait for a connection (with ctx, so
	// a cancelled caller stops waiting). Two callers racing on a new query
	// both prepare; the loser closes its copy.
	st, err := d.DB.PrepareContext(ctx, query)
	if err != nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if prev, ok := d.stmts[query]; ok || d.closed || len(d.stmts) >= maxCachedStmts {
		st.Close()
		return prev
	}
	d.stmts[query] = st
	return st
}

func (d *stmtDB) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st := d.stmt(ctx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return d.DB.ExecContext(ctx, query, args...)
}

func (d *stmtDB) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := d.stmt(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return d.DB.QueryContext(ctx, query, args...)
}

func (d *stmtDB) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := d.stmt(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return d.DB.QueryRowContext(ctx, query, args...)
}

// Close closes the cached statements, then the database.
func (d *stmtDB) Close() error {
	d.mu.Lock()
	var errs []error
	for q, st := range d.stmts {
		errs = append(errs, st.Close())
		delete(d.stmts, q)
	}
	d.closed = true
	d.mu.Unlock()
	return errors.Join(append(errs, d.DB.Close())...)
}

// cached returns query's statement if it is prepared already, else nil.
func (d *stmtDB) cached(query string) *sql.Stmt {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stmts[query]
}

// stmtTx is a transaction on a stmtDB that runs the statements its database
// has prepared already. It cannot prepare one itself: the writer's one
// connection is the transaction's until it ends, so the statements it ran
// unprepared are noted and prepared by prepareMissed after it ends.
type stmtTx struct {
	*sql.Tx
	db     *stmtDB
	missed []string
}

func (t *stmtTx) stmt(ctx context.Context, query string) *sql.Stmt {
	st := t.db.cached(query)
	if st == nil {
		t.missed = append(t.missed, query)
		return nil
	}
	// Bound to the transaction (closed when it ends); its connection has
	// the statement prepared, so database/sql reuses it.
	return t.Tx.StmtContext(ctx, st)
}

func (t *stmtTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st := t.stmt(ctx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return t.Tx.ExecContext(ctx, query, args...)
}

func (t *stmtTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := t.stmt(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return t.Tx.QueryContext(ctx, query, args...)
}

func (t *stmtTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := t.stmt(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return t.Tx.QueryRowContext(ctx, query, args...)
}

// prepareMissed prepares the statements the transaction ran unprepared, for
// the next one; call it after the transaction ended.
func (t *stmtTx) prepareMissed(ctx context.Context) {
	for _, q := range t.missed {
		t.db.stmt(ctx, q)
	}
}
