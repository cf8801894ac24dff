package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
)

// SandboxState is where a sandbox is in its lifecycle. The transitions
// between states are decided by the session package; the store only records
// them (with compare-and-set, see UpdateSandboxState).
type SandboxState string

const (
	StateCreating   SandboxState = "creating"
	StateRunning    SandboxState = "running"
	StatePaused     SandboxState = "paused"
	StateHibernated SandboxState = "hibernated" // memory on disk (gvisor) or filesystem only (native); see DESIGN.md
	StateStopped    SandboxState = "stopped"
	StateDestroyed  SandboxState = "destroyed"
	StateFailed     SandboxState = "failed"
)

// Valid reports whether st is one of the known states.
func (st SandboxState) Valid() bool {
	switch st {
	case StateCreating, StateRunning, StatePaused, StateHibernated, StateStopped, StateDestroyed, StateFailed:
		return true
	}
	return false
}

// Sandbox is the stored record of one sandbox.
type Sandbox struct {
	ID, Team, Template, Runtime  string
	State                        SandboxState
	Reason                       string            // why it failed (or stopped)
	Metadata                     map[string]string // E2B metadata / labels
	Env                          map[string]string // envVars given at create
	MemoryBytes, CPUMillis, Pids int64
	CreatedAt, UpdatedAt         time.Time
	StartedAt                    time.Time // when it started: CreatedAt unless given; never changes (listings are ordered by it)
	EndAt                        time.Time // when the run timeout fires (zero = never)

	// Lineage. A fresh sandbox starts a family of its own; a fork joins the
	// family of the sandbox it was forked from, so one query finds the tree.
	Family        string // default: ID
	ForkedFrom    string // the snapshot it was made from ("" = made from a template)
	ParentSandbox string // the sandbox that snapshot was taken of ("" = none)
	Head          string // the snapshot the live tree last descended from ("" = its origin)
	Turn          int    // the last turn number taken (0 = none)
	QuotaBytes    int64  // disk quota (0 = none)
	// AutoPause pauses the sandbox when its run timeout fires, instead of
	// killing it; AutoResume resumes a paused sandbox on any call that
	// needs it (E2B's autoPause and autoResume).
	AutoPause  bool
	AutoResume bool
	// AutoPauseFilesOnly: the auto-pause keeps only the files (E2B's
	// autoPauseMemory: false).
	AutoPauseFilesOnly bool
	// PublicPorts: the sandbox's ports take requests without its tokens
	// (E2B's allowPublicTraffic=true).
	PublicPorts bool
	// MaskRequestHost is the Host a request to one of its ports carries to
	// the server inside, "${PORT}" standing for the port ("" = the
	// caller's Host; E2B's network.maskRequestHost).
	MaskRequestHost string
	// ToolSnapshots: a turn snapshot follows every tool call.
	ToolSnapshots bool
	// Network is the sandbox's egress policy; nil means no network
	// (loopback only).
	Network *NetworkPolicy
	// IdempotencyKey is the key the create was sent with ("" = none); a
	// team has at most one sandbox per key (ErrAlreadyExists).
	IdempotencyKey string
	// VolumeMounts are the shared volumes it mounts (table
	// sandbox_volume_mounts): written with the record; reads leave it nil
	// (SandboxVolumeMounts reads them: a query most calls do not need).
	VolumeMounts []VolumeMount
}

// Cursor returns a paging cursor that points just after sb in either
// order: its start time and id. Unlike sb's bare id (also accepted as
// SandboxFilter.After), it keeps working if sb is deleted before the next
// page is read.
func (sb Sandbox) Cursor() string {
	return strconv.FormatInt(toNanos(sb.StartedAt), 10) + "." + sb.ID
}

// SandboxFilter selects sandboxes for ListSandboxes. The zero value selects
// all of them, oldest first.
type SandboxFilter struct {
	Team     string            // "" = every team
	Family   string            // "" = every family
	Template string            // "" = any template
	States   []SandboxState    // any of these; empty = any state
	Metadata map[string]string // every pair must match
	// StartedAfter keeps the sandboxes started after it (zero = all).
	StartedAfter time.Time
	// Newest lists the latest started first (E2B's default order);
	// otherwise the earliest first.
	Newest bool
	Limit  int // 0 = no limit
	// After is where the page starts: the id or the Cursor() of the last
	// sandbox of the previous page. Sandboxes are ordered by start time
	// (session.Create sets it with the record, and it never changes), then
	// id, in the direction Newest says.
	After string
}

// maxMapBytes bounds the encoded metadata and env of one sandbox; they come
// from API callers.
const maxMapBytes = 64 << 10

const sandboxCols = `id, team, template, runtime, state, reason, metadata, env,
	memory_bytes, cpu_millis, pids, created_at, updated_at, started_at, end_at,
	family, forked_from, parent_sandbox, head, turn, quota_bytes, auto_pause, auto_resume, public_ports, tool_snapshots, network, idempotency_key, auto_pause_files_only, mask_request_host`

// CreateSandbox records a new sandbox. CreatedAt defaults to now; UpdatedAt
// is always now; Family defaults to ID. A duplicate id is ErrAlreadyExists.
func (s *sandboxTable) CreateSandbox(ctx context.Context, sb Sandbox) error {
	if len(sb.VolumeMounts) == 0 {
		return insertSandbox(ctx, s.w, sb, s.sealer)
	}
	return s.writeTx(ctx, func(ctx context.Context, tx *stmtTx) error { return insertSandbox(ctx, tx, sb, s.sealer) })
}

// CreateSandboxRecorded creates sb's record together with the lineage edge
// and the event of its creation, in one transaction: one commit on a
// create's path instead of three.
func (s *sandboxTable) CreateSandboxRecorded(ctx context.Context, sb Sandbox, edge LineageEdge, ev Event) error {
	return s.writeTx(ctx, func(ctx context.Context, tx *stmtTx) error {
		if err := insertSandbox(ctx, tx, sb, s.sealer); err != nil {
			return err
		}
		if err := insertEdge(ctx, tx, edge); err != nil {
			return err
		}
		return insertEvent(ctx, tx, ev)
	})
}

// execer is a database or a transaction.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

func insertSandbox(ctx context.Context, ex execer, sb Sandbox, seal NetworkSealer) error {
	if sb.Family == "" {
		sb.Family = sb.ID
	}
	if err := validateSandbox(sb); err != nil {
		return err
	}
	md, err := encodeMap("metadata", sb.Metadata)
	if err != nil {
		return fmt.Errorf("sandbox %s: %w", sb.ID, err)
	}
	env, err := encodeMap("env", sb.Env)
	if err != nil {
		return fmt.Errorf("sandbox %s: %w", sb.ID, err)
	}
	netPolicy, err := encodeNetwork(sb.Network, seal)
	if err != nil {
		return fmt.Errorf("sandbox %s: %w", sb.ID, err)
	}
	now := time.Now()
	if sb.CreatedAt.IsZero() {
		sb.CreatedAt = now
	}
	if sb.StartedAt.IsZero() {
		// Listings page by (started_at, id): a key that moved later would
		// skip or repeat the sandbox between pages.
		sb.StartedAt = sb.CreatedAt
	}
	_, err = ex.ExecContext(ctx, `INSERT INTO sandboxes (`+sandboxCols+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		sb.ID, sb.Team, sb.Template, sb.Runtime, string(sb.State), sb.Reason, md, env,
		sb.MemoryBytes, sb.CPUMillis, sb.Pids,
		toNanos(sb.CreatedAt), toNanos(now), toNanos(sb.StartedAt), toNanos(sb.EndAt),
		sb.Family, sb.ForkedFrom, sb.ParentSandbox, sb.Head, sb.Turn, sb.QuotaBytes, sb.AutoPause, sb.AutoResume, sb.PublicPorts, sb.ToolSnapshots, netPolicy, sb.IdempotencyKey, sb.AutoPauseFilesOnly, sb.MaskRequestHost)
	if err != nil {
		return fmt.Errorf("create sandbox %s: %w", sb.ID, dbErr(err))
	}
	return insertMounts(ctx, ex, sb.ID, sb.VolumeMounts)
}

func validateSandbox(sb Sandbox) error {
	if err := ids.Validate("sandbox id", sb.ID); err != nil {
		return err
	}
	if err := ids.ValidateName("team", sb.Team); err != nil {
		return fmt.Errorf("sandbox %s: %w", sb.ID, err)
	}
	if err := ids.ValidateName("template name", sb.Template); err != nil {
		return fmt.Errorf("sandbox %s: %w", sb.ID, err)
	}
	if err := ids.ValidateName("runtime name", sb.Runtime); err != nil {
		return fmt.Errorf("sandbox %s: %w", sb.ID, err)
	}
	if !sb.State.Valid() {
		return fmt.Errorf("sandbox %s: unknown state %q: %w", sb.ID, sb.State, errdefs.ErrInvalid)
	}
	if sb.MemoryBytes < 0 || sb.CPUMillis < 0 || sb.Pids < 0 {
		return fmt.Errorf("sandbox %s: memory, cpu and pids limits must not be negative: %w", sb.ID, errdefs.ErrInvalid)
	}
	if err := ValidateIdempotencyKey(sb.IdempotencyKey); err != nil {
		return fmt.Errorf("sandbox %s: %w", sb.ID, err)
	}
	return validateLineage(sb)
}

// MaxIdempotencyKeyLen bounds an Idempotency-Key (Stripe's bound).
const MaxIdempotencyKeyLen = 255

// ValidateIdempotencyKey checks a create's Idempotency-Key: at most
// MaxIdempotencyKeyLen printable ASCII characters ("" = none).
func ValidateIdempotencyKey(key string) error {
	if len(key) > MaxIdempotencyKeyLen {
		return fmt.Errorf("idempotency key is %d characters, more than %d: %w", len(key), MaxIdempotencyKeyLen, errdefs.ErrInvalid)
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e {
			return fmt.Errorf("idempotency key may hold only printable ASCII characters: %w", errdefs.ErrInvalid)
		}
	}
	return nil
}

// SandboxByIdempotencyKey returns the team's sandbox created with key, or
// ErrNotFound.
func (s *sandboxTable) SandboxByIdempotencyKey(ctx context.Context, team, key string) (Sandbox, error) {
	if key == "" {
		return Sandbox{}, fmt.Errorf("empty idempotency key: %w", errdefs.ErrNotFound)
	}
	row := s.r.QueryRowContext(ctx, `SELECT `+sandboxCols+` FROM sandboxes WHERE team = ? AND idempotency_key = ?`, team, key)
	sb, err := s.scanSandbox(row)
	if errors.Is(err, sql.ErrNoRows) {
		return Sandbox{}, fmt.Errorf("no sandbox of team %s was created with that idempotency key: %w", team, errdefs.ErrNotFound)
	}
	if err != nil {
		return Sandbox{}, fmt.Errorf("find sandbox by idempotency key: %w", dbErr(err))
	}
	return sb, nil
}

// ForgetIdempotencyKey frees a team's key for another create: the sandbox
// made with it keeps existing, but a create with the key no longer finds it.
func (s *sandboxTable) ForgetIdempotencyKey(ctx context.Context, team, key string) error {
	_, err := s.w.ExecContext(ctx, `UPDATE sandboxes SET idempotency_key = '' WHERE team = ? AND idempotency_key = ?`, team, key)
	if err != nil {
		return fmt.Errorf("forget idempotency key: %w", dbErr(err))
	}
	return nil
}

// encodeMap encodes m as a JSON object. Strings must be valid UTF-8: JSON
// would otherwise replace bad bytes and a value would not round-trip.
func encodeMap(what string, m map[string]string) (string, error) {
	for k, v := range m {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return "", fmt.Errorf("%s key %q: keys and values must be valid UTF-8: %w", what, k, errdefs.ErrInvalid)
		}
	}
	if m == nil {
		m = map[string]string{}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("encode %s: %w", what, errdefs.ErrInvalid)
	}
	if len(b) > maxMapBytes {
		return "", fmt.Errorf("%s is %d bytes encoded, more than the %d allowed: %w", what, len(b), maxMapBytes, errdefs.ErrInvalid)
	}
	return string(b), nil
}

// GetSandbox returns one sandbox, or ErrNotFound.
func (s *sandboxTable) GetSandbox(ctx context.Context, id string) (Sandbox, error) {
	row := s.r.QueryRowContext(ctx, `SELECT `+sandboxCols+` FROM sandboxes WHERE id = ?`, id)
	sb, err := s.scanSandbox(row)
	if errors.Is(err, sql.ErrNoRows) {
		return Sandbox{}, fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	if err != nil {
		return Sandbox{}, fmt.Errorf("get sandbox %s: %w", id, dbErr(err))
	}
	return sb, nil
}

// ListSandboxes returns the sandboxes f selects, ordered by start time then
// id (newest first if f.Newest).
func (s *sandboxTable) ListSandboxes(ctx context.Context, f SandboxFilter) ([]Sandbox, error) {
	var where []string
	var args []any
	if f.Team != "" {
		if err := ids.ValidateName("team", f.Team); err != nil {
			return nil, err
		}
		where = append(where, `team = ?`)
		args = append(args, f.Team)
	}
	if f.Family != "" {
		if err := ids.Validate("family", f.Family); err != nil {
			return nil, err
		}
		where = append(where, `family = ?`)
		args = append(args, f.Family)
	}
	if f.Template != "" {
		where = append(where, `template = ?`)
		args = append(args, f.Template)
	}
	if !f.StartedAfter.IsZero() {
		where = append(where, `started_at > ?`)
		args = append(args, toNanos(f.StartedAfter))
	}
	if len(f.States) > 0 {
		where = append(where, `state IN (`+placeholders(len(f.States))+`)`)
		for _, st := range f.States {
			args = append(args, string(st))
		}
	}
	// Keys in sorted order keep the statement text stable for a given filter.
	keys := make([]string, 0, len(f.Metadata))
	for k := range f.Metadata {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		where = append(where, `EXISTS (SELECT 1 FROM json_each(sandboxes.metadata) AS m
			WHERE m.key = ? AND m.type = 'text' AND m.value = ?)`)
		args = append(args, k, f.Metadata[k])
	}
	return runList(ctx, s.conns, listQuery{table: "sandboxes", kind: "sandbox", cols: sandboxCols,
		key: "started_at", desc: f.Newest, where: where, args: args, after: f.After, limit: f.Limit}, s.scanSandbox)
}

// CountSandboxes counts the sandboxes in any of states (all sandboxes when
// none are given).
func (s *sandboxTable) CountSandboxes(ctx context.Context, states ...SandboxState) (int, error) {
	q := `SELECT count(*) FROM sandboxes`
	var args []any
	if len(states) > 0 {
		q += ` WHERE state IN (` + placeholders(len(states)) + `)`
		for _, st := range states {
			args = append(args, string(st))
		}
	}
	var n int
	if err := s.r.QueryRowContext(ctx, q, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count sandboxes: %w", dbErr(err))
	}
	return n, nil
}

// UpdateSandboxState moves a sandbox to state to, but only if its current
// state is one of from (nil or empty from: any state): a compare-and-set, so
// two racing callers cannot both win. A sandbox in another state is
// ErrConflict; a missing one ErrNotFound. reason replaces the stored reason
// ("" clears it). The first move to running sets StartedAt if it is unset
// (only in records from before every record had one).
func (s *sandboxTable) UpdateSandboxState(ctx context.Context, id string, from []SandboxState, to SandboxState, reason string) error {
	if !to.Valid() {
		return fmt.Errorf("sandbox %s: unknown state %q: %w", id, to, errdefs.ErrInvalid)
	}
	return s.writeTx(ctx, func(ctx context.Context, tx *stmtTx) error {
		var cur string
		err := tx.QueryRowContext(ctx, `SELECT state FROM sandboxes WHERE id = ?`, id).Scan(&cur)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("sandbox %s: %w", id, dbErr(err))
		}
		if len(from) > 0 && !slices.Contains(from, SandboxState(cur)) {
			return fmt.Errorf("sandbox %s is %s, so it cannot become %s (only from %v): %w", id, cur, to, from, errdefs.ErrConflict)
		}
		now := toNanos(time.Now())
		_, err = tx.ExecContext(ctx, `UPDATE sandboxes SET state = ?, reason = ?, updated_at = ?,
			started_at = CASE WHEN ? AND started_at = 0 THEN ? ELSE started_at END
			WHERE id = ?`, string(to), reason, now, to == StateRunning, now, id)
		if err != nil {
			return fmt.Errorf("update sandbox %s state: %w", id, dbErr(err))
		}
		return nil
	})
}

// SetSandboxEndAt sets when the sandbox's run timeout fires (zero = never).
func (s *sandboxTable) SetSandboxEndAt(ctx context.Context, id string, endAt time.Time) error {
	res, err := s.w.ExecContext(ctx, `UPDATE sandboxes SET end_at = ?, updated_at = ? WHERE id = ?`,
		toNanos(endAt), toNanos(time.Now()), id)
	return oneRow(res, err, "set end time of sandbox", id)
}

// DeleteSandbox removes a sandbox's row (a purge; to keep the record of a
// destroyed sandbox, move it to StateDestroyed instead).
func (s *sandboxTable) DeleteSandbox(ctx context.Context, id string) error {
	return s.writeTx(ctx, func(ctx context.Context, tx *stmtTx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM sandboxes WHERE id = ?`, id)
		if err := oneRow(res, err, "delete sandbox", id); err != nil {
			return err
		}
		// Its egress audit goes with it (its lifecycle events stay).
		if _, err := tx.ExecContext(ctx, `DELETE FROM network_events WHERE sandbox_id = ?`, id); err != nil {
			return fmt.Errorf("delete network events of %s: %w", id, dbErr(err))
		}
		// So do its volume mounts (the volumes stay).
		if _, err := tx.ExecContext(ctx, `DELETE FROM sandbox_volume_mounts WHERE sandbox_id = ?`, id); err != nil {
			return fmt.Errorf("delete volume mounts of %s: %w", id, dbErr(err))
		}
		return nil
	})
}

// oneRow checks that a write by id touched a row.
func oneRow(res sql.Result, err error, doing, id string) error {
	if err != nil {
		return fmt.Errorf("%s %s: %w", doing, id, dbErr(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("%s %s: %w", doing, id, dbErr(err))
	}
	if n == 0 {
		return fmt.Errorf("%s %s: %w", doing, id, errdefs.ErrNotFound)
	}
	return nil
}

type scanner interface{ Scan(dest ...any) error }

func (c *conns) scanSandbox(sc scanner) (Sandbox, error) {
	var sb Sandbox
	var state, md, env, netPolicy string
	var created, updated, started, end int64
	err := sc.Scan(&sb.ID, &sb.Team, &sb.Template, &sb.Runtime, &state, &sb.Reason, &md, &env,
		&sb.MemoryBytes, &sb.CPUMillis, &sb.Pids, &created, &updated, &started, &end,
		&sb.Family, &sb.ForkedFrom, &sb.ParentSandbox, &sb.Head, &sb.Turn, &sb.QuotaBytes, &sb.AutoPause, &sb.AutoResume, &sb.PublicPorts, &sb.ToolSnapshots,
		&netPolicy, &sb.IdempotencyKey, &sb.AutoPauseFilesOnly, &sb.MaskRequestHost)
	if err != nil {
		return Sandbox{}, err
	}
	if sb.Network, err = decodeNetwork(netPolicy, c.sealer); err != nil {
		return Sandbox{}, fmt.Errorf("sandbox %s: stored network policy is corrupt: %w", sb.ID, err)
	}
	sb.State = SandboxState(state)
	sb.CreatedAt, sb.UpdatedAt = fromNanos(created), fromNanos(updated)
	sb.StartedAt, sb.EndAt = fromNanos(started), fromNanos(end)
	if err := json.Unmarshal([]byte(md), &sb.Metadata); err != nil {
		return Sandbox{}, fmt.Errorf("sandbox %s: stored metadata is corrupt: %w", sb.ID, err)
	}
	if err := json.Unmarshal([]byte(env), &sb.Env); err != nil {
		return Sandbox{}, fmt.Errorf("sandbox %s: stored env is corrupt: %w", sb.ID, err)
	}
	return sb, nil
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

// SetSandboxLimits records a sandbox's new limits (zero fields keep theirs).
// SetSandboxQuota records a sandbox's new disk quota (0 = none).
func (s *sandboxTable) SetSandboxQuota(ctx context.Context, id string, bytes int64) error {
	if err := ids.Validate("sandbox id", id); err != nil {
		return err
	}
	if bytes < 0 {
		return fmt.Errorf("disk quota must not be negative: %w", errdefs.ErrInvalid)
	}
	res, err := s.w.ExecContext(ctx, `UPDATE sandboxes SET quota_bytes = ?, updated_at = ? WHERE id = ?`, bytes, toNanos(time.Now()), id)
	if err != nil {
		return fmt.Errorf("update disk quota of %s: %w", id, dbErr(err))
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	return nil
}

func (s *sandboxTable) SetSandboxLimits(ctx context.Context, id string, memoryBytes, cpuMillis, pids int64) error {
	if err := ids.Validate("sandbox id", id); err != nil {
		return err
	}
	if memoryBytes < 0 || cpuMillis < 0 || pids < 0 {
		return fmt.Errorf("limits must not be negative: %w", errdefs.ErrInvalid)
	}
	res, err := s.w.ExecContext(ctx, `UPDATE sandboxes SET
		memory_bytes = CASE WHEN ? > 0 THEN ? ELSE memory_bytes END,
		cpu_millis   = CASE WHEN ? > 0 THEN ? ELSE cpu_millis END,
		pids         = CASE WHEN ? > 0 THEN ? ELSE pids END,
		updated_at   = ?
		WHERE id = ?`, memoryBytes, memoryBytes, cpuMillis, cpuMillis, pids, pids, toNanos(time.Now()), id)
	if err != nil {
		return fmt.Errorf("update limits of %s: %w", id, dbErr(err))
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("sandbox %s: %w", id, errdefs.ErrNotFound)
	}
	return nil
}
