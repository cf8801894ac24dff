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

	// 8-14: lineage of sandboxes. Rows from before have no lineage: each is
	// the root of a family of its own.
	`ALTER TABLE sandboxes ADD COLUMN family TEXT NOT NULL DEFAULT ''`,
	// 9
	`UPDATE sandboxes SET family = id WHERE family = ''`,
	// 10
	`ALTER TABLE sandboxes ADD COLUMN forked_from TEXT NOT NULL DEFAULT ''`,
	// 11
	`ALTER TABLE sandboxes ADD COLUMN parent_sandbox TEXT NOT NULL DEFAULT ''`,
	// 12
	`ALTER TABLE sandboxes ADD COLUMN head TEXT NOT NULL DEFAULT ''`,
	// 13
	`ALTER TABLE sandboxes ADD COLUMN turn INTEGER NOT NULL DEFAULT 0`,
	// 14
	`ALTER TABLE sandboxes ADD COLUMN quota_bytes INTEGER NOT NULL DEFAULT 0`,
	// 15: a family's sandboxes, in listing order.
	`CREATE INDEX sandboxes_by_family ON sandboxes (family, created_at, id)`,
	// 16: counting the forks that still use a snapshot before deleting it.
	`CREATE INDEX sandboxes_by_forked_from ON sandboxes (forked_from)`,
	// 17
	`CREATE TABLE snapshots (
		id               TEXT PRIMARY KEY,
		team             TEXT NOT NULL,
		sandbox_id       TEXT NOT NULL,
		family           TEXT NOT NULL,
		name             TEXT NOT NULL DEFAULT '',   -- '' = unnamed; turn snapshots are turn-N
		kind             TEXT NOT NULL,
		turn             INTEGER NOT NULL DEFAULT 0,
		parent_id        TEXT NOT NULL DEFAULT '',   -- '' = the lineage's origin
		template         TEXT NOT NULL,
		state            TEXT NOT NULL,
		labels           TEXT NOT NULL DEFAULT '{}', -- JSON object of strings
		exclusive_bytes  INTEGER NOT NULL DEFAULT -1, -- -1 = unknown
		referenced_bytes INTEGER NOT NULL DEFAULT -1,
		created_at       INTEGER NOT NULL,            -- Unix ns
		deleted_at       INTEGER NOT NULL DEFAULT 0
	) STRICT`,
	// 18: a user's name picks one live snapshot in a team. Turn snapshots
	// are left out: every sandbox has a turn-1, so theirs are unique per
	// sandbox instead (19). Deleted snapshots free their name.
	`CREATE UNIQUE INDEX snapshots_name_unique ON snapshots (team, name)
		WHERE name != '' AND kind != 'turn' AND state != 'deleted'`,
	// 19
	`CREATE UNIQUE INDEX snapshots_turn_unique ON snapshots (sandbox_id, turn)
		WHERE kind = 'turn' AND state != 'deleted'`,
	// 20: listing order, all teams; then a team's, a sandbox's, a family's.
	`CREATE INDEX snapshots_by_created ON snapshots (created_at, id)`,
	// 21
	`CREATE INDEX snapshots_by_team ON snapshots (team, created_at, id)`,
	// 22
	`CREATE INDEX snapshots_by_sandbox ON snapshots (sandbox_id, created_at, id)`,
	// 23
	`CREATE INDEX snapshots_by_family ON snapshots (family, created_at, id)`,
	// 24: lookups by name (the partial unique index above cannot serve them:
	// SQLite does not prove name = ? implies its WHERE), ordered as listed so
	// the planner does not prefer the team index to avoid a sort.
	`CREATE INDEX snapshots_by_name ON snapshots (team, name, created_at, id)`,
	// 25: AUTOINCREMENT so an edge's id is never reused and the order of ids
	// is the order things happened.
	`CREATE TABLE lineage_edges (
		id      INTEGER PRIMARY KEY AUTOINCREMENT,
		family  TEXT NOT NULL,
		kind    TEXT NOT NULL,
		from_id TEXT NOT NULL,
		to_id   TEXT NOT NULL,
		at      INTEGER NOT NULL -- Unix ns
	) STRICT`,
	// 26
	`CREATE INDEX lineage_edges_by_family ON lineage_edges (family, id)`,

	// 27-29: archived snapshots (state 'archived'): the stream file that
	// rebuilds one, and the snapshot the stream is a delta against.
	`ALTER TABLE snapshots ADD COLUMN archive_parent TEXT NOT NULL DEFAULT ''`,
	// 28
	`ALTER TABLE snapshots ADD COLUMN archive_path TEXT NOT NULL DEFAULT ''`,
	// 29: an anchor is not deleted while archived snapshots need it.
	`CREATE INDEX snapshots_by_archive_parent ON snapshots (archive_parent, state)`,

	// 30-31: a sandbox's lifecycle history: every transition with its time
	// and cause.
	`CREATE TABLE sandbox_events (
		id         INTEGER PRIMARY KEY AUTOINCREMENT,
		sandbox_id TEXT NOT NULL,
		team       TEXT NOT NULL,
		at         INTEGER NOT NULL, -- Unix ns
		kind       TEXT NOT NULL,
		from_state TEXT NOT NULL,
		to_state   TEXT NOT NULL,
		cause      TEXT NOT NULL,
		detail     TEXT NOT NULL
	) STRICT`,
	// 31
	`CREATE INDEX sandbox_events_by_sandbox ON sandbox_events (sandbox_id, id)`,

	// 32-33: E2B's autoPause (pause, not kill, at the run timeout) and
	// autoResume (a call that needs a paused sandbox resumes it).
	`ALTER TABLE sandboxes ADD COLUMN auto_pause INTEGER NOT NULL DEFAULT 0`,
	// 33
	`ALTER TABLE sandboxes ADD COLUMN auto_resume INTEGER NOT NULL DEFAULT 0`,

	// 34: E2B's network.allowPublicTraffic=true: the sandbox's ports take
	// requests without its tokens.
	`ALTER TABLE sandboxes ADD COLUMN public_ports INTEGER NOT NULL DEFAULT 0`,

	// 35: snapshotEveryToolCall: a turn snapshot follows every tool call.
	`ALTER TABLE sandboxes ADD COLUMN tool_snapshots INTEGER NOT NULL DEFAULT 0`,
	// 36-37: every tool call an agent made in a sandbox.
	`CREATE TABLE tool_calls (
		id            INTEGER PRIMARY KEY AUTOINCREMENT,
		sandbox_id    TEXT NOT NULL,
		team          TEXT NOT NULL,
		tool_call_id  TEXT NOT NULL,
		tool          TEXT NOT NULL,
		at            INTEGER NOT NULL, -- Unix ns
		params_digest TEXT NOT NULL,
		params_bytes  INTEGER NOT NULL,
		result_bytes  INTEGER NOT NULL,
		duration_ms   INTEGER NOT NULL,
		is_error      INTEGER NOT NULL,
		exit_code     INTEGER, -- NULL: the tool has no exit code
		turn          INTEGER NOT NULL,
		snapshot_id   TEXT NOT NULL
	) STRICT`,
	// 37
	`CREATE INDEX tool_calls_by_sandbox ON tool_calls (sandbox_id, id)`,
	// 38: a sandbox's egress policy as JSON ('' = no network: loopback only).
	`ALTER TABLE sandboxes ADD COLUMN network TEXT NOT NULL DEFAULT ''`,
	// 39-40: the egress audit, bounded per sandbox (see AddNetworkEvents).
	`CREATE TABLE network_events (
		id          INTEGER PRIMARY KEY AUTOINCREMENT,
		sandbox_id  TEXT NOT NULL,
		at          INTEGER NOT NULL, -- Unix ns
		verdict     TEXT NOT NULL,
		reason      TEXT NOT NULL,
		protocol    TEXT NOT NULL,
		destination TEXT NOT NULL,
		port        INTEGER NOT NULL,
		domain      TEXT NOT NULL
	) STRICT`,
	// 40
	`CREATE INDEX network_events_by_sandbox ON network_events (sandbox_id, id)`,
	// 41: a snapshot that also saved the sandbox's memory and processes
	// (gvisor): the size of that image (0 = files only).
	`ALTER TABLE snapshots ADD COLUMN memory_bytes INTEGER NOT NULL DEFAULT 0`,
	// 42: the runtime every sandbox of a template must run on ('' = any:
	// the create's or the server's default).
	`ALTER TABLE templates ADD COLUMN runtime TEXT NOT NULL DEFAULT ''`,
	// 43: a sandbox's turns still in the pool, which archiving plans from
	// (TurnWindow) without reading the archived rest of a long history.
	`CREATE INDEX snapshots_ready_turns ON snapshots (sandbox_id, turn) WHERE kind = 'turn' AND state = 'ready'`,
	// 44-45: the Idempotency-Key a create was sent with ('' = none), unique
	// per team, so that a retried create finds the sandbox the first made.
	`ALTER TABLE sandboxes ADD COLUMN idempotency_key TEXT NOT NULL DEFAULT ''`,
	// 45
	`CREATE UNIQUE INDEX sandboxes_by_idempotency_key ON sandboxes (team, idempotency_key) WHERE idempotency_key != ''`,
	// 46: where a key came from: '' made on this node, 'fleet' synced from
	// the Kubernetes API server's key Secrets (node mode), which revokes it
	// when its Secret goes.
	`ALTER TABLE api_keys ADD COLUMN source TEXT NOT NULL DEFAULT ''`,
	// 47: listing a team's sandboxes by start time (E2B's order, either
	// way) and paging by (started_at, id).
	`CREATE INDEX sandboxes_by_team_started ON sandboxes (team, started_at, id)`,
	// 48: records made before every record had a start time (one that
	// never ran) take their creation time, so that no start time moves.
	`UPDATE sandboxes SET started_at = created_at WHERE started_at = 0`,
	// 49: a template may start its sandboxes with no_new_privs.
	`ALTER TABLE templates ADD COLUMN no_new_privileges INTEGER NOT NULL DEFAULT 0`,
	// 50: an auto-pause may keep only the files (E2B's autoPauseMemory:
	// false).
	`ALTER TABLE sandboxes ADD COLUMN auto_pause_files_only INTEGER NOT NULL DEFAULT 0`,
	// 51: what one team's sandboxes may hold together (0 = no limit).
	`CREATE TABLE team_limits (
		team         TEXT PRIMARY KEY,
		sandboxes    INTEGER NOT NULL DEFAULT 0,
		memory_bytes INTEGER NOT NULL DEFAULT 0,
		cpu_millis   INTEGER NOT NULL DEFAULT 0,
		disk_bytes   INTEGER NOT NULL DEFAULT 0,
		updated_at   INTEGER NOT NULL DEFAULT 0
	)`,
	// 52-54: shared volumes (E2B's Volume), one name per team, and the
	// volumes each sandbox mounts (one path each, one volume once).
	`CREATE TABLE volumes (id TEXT PRIMARY KEY, team TEXT NOT NULL, name TEXT NOT NULL, token TEXT NOT NULL,
		size_bytes INTEGER NOT NULL DEFAULT 0, created_at INTEGER NOT NULL, UNIQUE (team, name))`,
	// 53
	`CREATE TABLE sandbox_volume_mounts (sandbox_id TEXT NOT NULL, volume_id TEXT NOT NULL, path TEXT NOT NULL,
		PRIMARY KEY (sandbox_id, path), UNIQUE (sandbox_id, volume_id))`,
	// 54
	`CREATE INDEX sandbox_volume_mounts_by_volume ON sandbox_volume_mounts (volume_id)`,
	// 55: the Host its port routes hand the server inside ('' = the
	// caller's; E2B's network.maskRequestHost, "${PORT}" for the port).
	`ALTER TABLE sandboxes ADD COLUMN mask_request_host TEXT NOT NULL DEFAULT ''`,
	// 56: a team's secrets (E2B's /secrets) and warren's allowedHosts;
	// the values live encrypted in secret_versions, one row per version.
	`CREATE TABLE secrets (
		id TEXT PRIMARY KEY,
		team TEXT NOT NULL,
		name TEXT NOT NULL,
		current_version INTEGER NOT NULL,
		metadata TEXT NOT NULL DEFAULT '{}',
		allowed_hosts TEXT NOT NULL DEFAULT '[]',
		created_at INTEGER NOT NULL,
		updated_at INTEGER NOT NULL,
		UNIQUE (team, name)
	)`,
	// 57: each version's value, sealed with AES-256-GCM (internal/secrets).
	`CREATE TABLE secret_versions (
		secret_id TEXT NOT NULL REFERENCES secrets (id) ON DELETE CASCADE,
		version INTEGER NOT NULL,
		sealed BLOB NOT NULL,
		created_at INTEGER NOT NULL,
		PRIMARY KEY (secret_id, version)
	)`,
	// 58: the block of host ids (slot × 65536 above the configured base)
	// each sandbox's user namespace maps to, kept across restarts so that
	// a restarted sandbox's processes keep their host uid. Warm-pool
	// sandboxes have no sandboxes row yet, hence no foreign key.
	`CREATE TABLE userns_slots (slot INTEGER PRIMARY KEY, sandbox_id TEXT NOT NULL UNIQUE)`,
	// 59: the CDI devices each sandbox holds (devices.go), kept across
	// restarts; exclusive is 0 for a device its spec calls shareable.
	`CREATE TABLE device_claims (
		device TEXT NOT NULL,
		sandbox_id TEXT NOT NULL,
		exclusive INTEGER NOT NULL,
		PRIMARY KEY (device, sandbox_id)
	)`,
	// 60: the devices (CDI names, comma-separated) a template's sandboxes
	// get when their create asks for none.
	`ALTER TABLE templates ADD COLUMN devices TEXT NOT NULL DEFAULT ''`,
	// 61-64: templates built from steps (E2B's Template SDK,
	// internal/tplbuild): a team's named templates, their builds (the
	// result is a files snapshot of the build sandbox), tags naming a
	// build, and the step cache (a snapshot after each step, by key).
	// 61
	`CREATE TABLE built_templates (id TEXT PRIMARY KEY, team TEXT NOT NULL, name TEXT NOT NULL,
		created_at INTEGER NOT NULL, UNIQUE (name))`,
	// 62
	`CREATE TABLE template_builds (id TEXT PRIMARY KEY,
		template_id TEXT NOT NULL REFERENCES built_templates (id) ON DELETE CASCADE,
		status TEXT NOT NULL, snapshot_id TEXT NOT NULL DEFAULT '', reason TEXT NOT NULL DEFAULT '',
		step TEXT NOT NULL DEFAULT '', start_cmd TEXT NOT NULL DEFAULT '', ready_cmd TEXT NOT NULL DEFAULT '',
		user TEXT NOT NULL DEFAULT '', workdir TEXT NOT NULL DEFAULT '',
		cached_steps INTEGER NOT NULL DEFAULT 0, created_at INTEGER NOT NULL, finished_at INTEGER NOT NULL DEFAULT 0)`,
	// 63
	`CREATE TABLE template_tags (template_id TEXT NOT NULL REFERENCES built_templates (id) ON DELETE CASCADE,
		tag TEXT NOT NULL, build_id TEXT NOT NULL, created_at INTEGER NOT NULL, PRIMARY KEY (template_id, tag))`,
	// 64
	`CREATE TABLE template_step_cache (team TEXT NOT NULL, key TEXT NOT NULL, snapshot_id TEXT NOT NULL,
		bytes INTEGER NOT NULL DEFAULT 0, last_used INTEGER NOT NULL, PRIMARY KEY (team, key))`,
	// 65: what a template build started from (its parent, JSON: a server
	// template, another built template's build, or an image), how many
	// steps it had and when it began to run (internal/tplbuild's chain
	// and history). One migration, three columns.
	`ALTER TABLE template_builds ADD COLUMN parent TEXT NOT NULL DEFAULT '{}';
	ALTER TABLE template_builds ADD COLUMN steps INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE template_builds ADD COLUMN started_at INTEGER NOT NULL DEFAULT 0`,
	// 66: a template build's start command snapshotted with memory (on a
	// runtime that saves memory: gvisor): the snapshot its sandboxes
	// restore, and the runtime the build ran on.
	`ALTER TABLE template_builds ADD COLUMN memory_snapshot_id TEXT NOT NULL DEFAULT '';
	ALTER TABLE template_builds ADD COLUMN runtime TEXT NOT NULL DEFAULT ''`,
	// 67: a placeholder for a migration another branch adds (a merge puts
	// it here).
	`SELECT 1`,
	// 68: a template build's network, as its log describes it ("internet",
	// "none (loopback only)", ...; '' for builds made before).
	`ALTER TABLE template_builds ADD COLUMN network TEXT NOT NULL DEFAULT ''`,
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
