package store

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/warrenhq/warren/internal/errdefs"
)

// migrations is the schema, one statement per entry, applied in order. The
// database's PRAGMA user_version is the number of entries already applied.
// Append only: never edit or reorder an entry that has shipped, add a new one
// (ALTER TABLE, CREATE TABLE, a data fix) at the end.
//
// Tables are STRICT so a wrongly typed value is an error, not a silent
// conversion. States are not CHECK-constrained: the session package owns the
// state machine, and a new state should not need a table rebuild.
var migrations = []string{
	// 1
	`CREATE TABLE sandboxes (
		id           TEXT PRIMARY KEY,
		team         TEXT NOT NULL,
		template     TEXT NOT NULL,
		runtime      TEXT NOT NULL,
		state        TEXT NOT NULL,
		reason       TEXT NOT NULL DEFAULT '',
		metadata     TEXT NOT NULL DEFAULT '{}', -- JSON object of strings
		env          TEXT NOT NULL DEFAULT '{}', -- JSON object of strings
		memory_bytes INTEGER NOT NULL DEFAULT 0,
		cpu_millis   INTEGER NOT NULL DEFAULT 0,
		pids         INTEGER NOT NULL DEFAULT 0,
		created_at   INTEGER NOT NULL,           -- Unix ns
		updated_at   INTEGER NOT NULL,
		started_at   INTEGER NOT NULL DEFAULT 0, -- 0 = not set
		end_at       INTEGER NOT NULL DEFAULT 0
	) STRICT`,
	// 2: listing order, all teams and one team.
	`CREATE INDEX sandboxes_by_created ON sandboxes (created_at, id)`,
	// 3
	`CREATE INDEX sandboxes_by_team ON sandboxes (team, created_at, id)`,
	// 4: counting live sandboxes for the max-sandboxes limit.
	`CREATE INDEX sandboxes_by_state ON sandboxes (state)`,
	// 5
	`CREATE TABLE templates (
		name       TEXT PRIMARY KEY,
		source     TEXT NOT NULL,
		created_at INTEGER NOT NULL,
		size_bytes INTEGER NOT NULL DEFAULT 0
	) STRICT`,
	// 6
	`CREATE TABLE api_keys (
		id           TEXT PRIMARY KEY,
		team         TEXT NOT NULL,
		name         TEXT NOT NULL,
		prefix       TEXT NOT NULL,
		hash         TEXT NOT NULL UNIQUE, -- SHA-256 hex of the whole key
		created_at   INTEGER NOT NULL,
		last_used_at INTEGER NOT NULL DEFAULT 0,
		revoked      INTEGER NOT NULL DEFAULT 0
	) STRICT`,
	// 7
	`CREATE INDEX api_keys_by_team ON api_keys (team, created_at, id)`,
}

// SchemaVersion is the schema version this build writes.
func SchemaVersion() int { return len(migrations) }

// migrate applies the migrations the database has not seen, all in one
// transaction: a failure leaves the schema as it was.
func migrate(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin schema migration: %w", dbErr(err))
	}
	defer tx.Rollback()

	var have int
	if err := tx.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&have); err != nil {
		return fmt.Errorf("read schema version: %w", dbErr(err))
	}
	if have > len(migrations) {
		return fmt.Errorf("schema version %d is newer than this warren understands (%d): run a newer warren: %w",
			have, len(migrations), errdefs.ErrUnsupported)
	}
	if have == len(migrations) {
		return nil
	}
	for i := have; i < len(migrations); i++ {
		if _, err := tx.ExecContext(ctx, migrations[i]); err != nil {
			return fmt.Errorf("schema migration %d: %w", i+1, dbErr(err))
		}
	}
	// user_version is part of the database header, so setting it inside the
	// transaction commits or rolls back with the migrations.
	if _, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, len(migrations))); err != nil {
		return fmt.Errorf("set schema version: %w", dbErr(err))
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit schema migration: %w", dbErr(err))
	}
	return nil
}
