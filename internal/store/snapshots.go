package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
)

// SnapshotState is where a snapshot is in its life. A deleted snapshot keeps
// its row (the lineage still points at it) but frees its name.
type SnapshotState string

const (
	SnapshotCreating SnapshotState = "creating"
	SnapshotReady    SnapshotState = "ready"
	SnapshotDeleted  SnapshotState = "deleted"
	// SnapshotArchived: the volume left the pool for a stream file
	// (ArchivePath) that rebuilds it against another snapshot's volume
	// (ArchiveParent). It is still usable: it is restored on demand.
	SnapshotArchived SnapshotState = "archived"
)

// Valid reports whether st is one of the known states.
func (st SnapshotState) Valid() bool {
	switch st {
	case SnapshotCreating, SnapshotReady, SnapshotDeleted, SnapshotArchived:
		return true
	}
	return false
}

// SnapshotKind says why a snapshot was taken.
type SnapshotKind string

const (
	SnapshotNamed    SnapshotKind = "named"    // a user asked for it, by name
	SnapshotTurn     SnapshotKind = "turn"     // the end of turn N, named turn-N
	SnapshotImplicit SnapshotKind = "implicit" // taken by warren itself (say, before a rollback)
)

// Valid reports whether k is one of the known kinds.
func (k SnapshotKind) Valid() bool {
	switch k {
	case SnapshotNamed, SnapshotTurn, SnapshotImplicit:
		return true
	}
	return false
}

// Snapshot is the stored record of one snapshot of a sandbox's tree.
//
// Names are unique among a team's live snapshots, with one exception: turn
// snapshots are named turn-N and every sandbox has its own turn-1, so their
// names are unique per sandbox instead, and other snapshots may not take a
// name of that form.
type Snapshot struct {
	ID, Team, SandboxID, Family string
	Name                        string // the user's name; "" if unnamed; turn-N for turn snapshots
	Kind                        SnapshotKind
	Turn                        int    // N for turn snapshots, else 0
	ParentID                    string // the snapshot the sandbox's tree descended from when this was taken ("" = origin)
	Template                    string // the template at the root of the lineage
	State                       SnapshotState
	Labels                      map[string]string
	ExclusiveBytes              int64 // bytes only this snapshot holds; -1 = unknown
	ReferencedBytes             int64 // bytes it refers to, shared or not; -1 = unknown
	CreatedAt, DeletedAt        time.Time
	// ArchiveParent and ArchivePath are set once the snapshot has been
	// archived: the stream file and the snapshot it is a delta against. A
	// ready snapshot may keep them (the stream stays valid while both
	// volumes are unchanged, so archiving it again costs nothing).
	ArchiveParent, ArchivePath string
	// MemoryBytes is the size of the image of the sandbox's memory and
	// processes saved with the files (gvisor only); 0 = files only.
	MemoryBytes int64
}

// Cursor returns a paging cursor that points just after sn (see
// Sandbox.Cursor).
func (sn Snapshot) Cursor() string {
	return strconv.FormatInt(toNanos(sn.CreatedAt), 10) + "." + sn.ID
}

// SnapshotFilter selects snapshots for ListSnapshots. The zero value selects
// all of them.
type SnapshotFilter struct {
	Team, SandboxID, Family, Name string // "" = any
	States                        []SnapshotState
	Kinds                         []SnapshotKind
	// ArchiveParent selects the snapshots whose stream is a delta against
	// it; WithStream only snapshots that have a stream.
	ArchiveParent string
	WithStream    bool
	Limit         int // 0 = no limit
	// After is the id or Cursor() of the last snapshot of the previous page.
	// Snapshots are ordered by creation time, then id.
	After string
}

// turnName is the form of a turn snapshot's name, reserved for them.
var turnName = regexp.MustCompile(`^turn-[0-9]+$`)

// IsTurnName says whether name has the form reserved for turn snapshots.
func IsTurnName(name string) bool { return turnName.MatchString(name) }

// TurnName is the name of the snapshot taken at the end of turn n.
func TurnName(n int) string { return "turn-" + strconv.Itoa(n) }

const snapshotCols = `id, team, sandbox_id, family, name, kind, turn, parent_id, template, state,
	labels, exclusive_bytes, referenced_bytes, created_at, deleted_at, archive_parent, archive_path, memory_bytes`

// CreateSnapshot records a new snapshot. CreatedAt defaults to now; a turn
// snapshot's Name defaults to turn-N. Sizes are stored as given: 0 is a
// size, so pass -1 when they are not measured yet. A duplicate id, or a
// name a live snapshot already has, is ErrAlreadyExists.
func (s *snapshotTable) CreateSnapshot(ctx context.Context, sn Snapshot) error {
	if sn.Kind == SnapshotTurn && sn.Name == "" && sn.Turn > 0 {
		sn.Name = TurnName(sn.Turn)
	}
	if err := validateSnapshot(sn); err != nil {
		return err
	}
	labels, err := encodeMap("labels", sn.Labels)
	if err != nil {
		return fmt.Errorf("snapshot %s: %w", sn.ID, err)
	}
	if sn.CreatedAt.IsZero() {
		sn.CreatedAt = time.Now()
	}
	_, err = s.w.ExecContext(ctx, `INSERT INTO snapshots (`+snapshotCols+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		sn.ID, sn.Team, sn.SandboxID, sn.Family, sn.Name, string(sn.Kind), sn.Turn, sn.ParentID,
		sn.Template, string(sn.State), labels, sn.ExclusiveBytes, sn.ReferencedBytes,
		toNanos(sn.CreatedAt), toNanos(sn.DeletedAt), sn.ArchiveParent, sn.ArchivePath, sn.MemoryBytes)
	if errdefs.IsAlreadyExists(dbErr(err)) {
		// Say which of the three unique keys it was: the id can be retried
		// with a new one, a name cannot.
		if _, gerr := s.getSnapshot(ctx, s.w, sn.ID); gerr == nil {
			return fmt.Errorf("snapshot id %s is taken: %w", sn.ID, errdefs.ErrAlreadyExists)
		}
		if sn.Kind == SnapshotTurn {
			return fmt.Errorf("sandbox %s already has a snapshot of turn %d: %w", sn.SandboxID, sn.Turn, errdefs.ErrAlreadyExists)
		}
		return fmt.Errorf("team %s already has a snapshot named %q; pick another name or delete that one: %w",
			sn.Team, sn.Name, errdefs.ErrAlreadyExists)
	}
	if err != nil {
		return fmt.Errorf("create snapshot %s: %w", sn.ID, dbErr(err))
	}
	return nil
}

func validateSnapshot(sn Snapshot) error {
	if err := ids.Validate("snapshot id", sn.ID); err != nil {
		return err
	}
	wrap := func(err error) error { return fmt.Errorf("snapshot %s: %w", sn.ID, err) }
	if err := ids.ValidateName("team", sn.Team); err != nil {
		return wrap(err)
	}
	if err := ids.Validate("sandbox id", sn.SandboxID); err != nil {
		return wrap(err)
	}
	if err := ids.Validate("family", sn.Family); err != nil {
		return wrap(err)
	}
	if err := ids.ValidateName("template name", sn.Template); err != nil {
		return wrap(err)
	}
	if sn.ParentID != "" {
		if err := ids.Validate("parent snapshot id", sn.ParentID); err != nil {
			return wrap(err)
		}
	}
	if !sn.State.Valid() {
		return wrap(fmt.Errorf("unknown state %q: %w", sn.State, errdefs.ErrInvalid))
	}
	if sn.Name != "" {
		if err := ids.ValidateName("snapshot name", sn.Name); err != nil {
			return wrap(err)
		}
	}
	switch sn.Kind {
	case SnapshotTurn:
		if sn.Turn <= 0 || sn.Name != TurnName(sn.Turn) {
			return wrap(fmt.Errorf("a turn snapshot needs a turn number above 0 and the name turn-<turn> (turn %d, name %q): %w",
				sn.Turn, sn.Name, errdefs.ErrInvalid))
		}
	case SnapshotNamed, SnapshotImplicit:
		if sn.Kind == SnapshotNamed && sn.Name == "" {
			return wrap(fmt.Errorf("a named snapshot needs a name: %w", errdefs.ErrInvalid))
		}
		if sn.Turn != 0 {
			return wrap(fmt.Errorf("only turn snapshots have a turn number: %w", errdefs.ErrInvalid))
		}
		if IsTurnName(sn.Name) {
			return wrap(fmt.Errorf("names of the form turn-N are kept for turn snapshots; pick another name than %q: %w",
				sn.Name, errdefs.ErrInvalid))
		}
	default:
		return wrap(fmt.Errorf("unknown kind %q: %w", sn.Kind, errdefs.ErrInvalid))
	}
	if sn.ExclusiveBytes < -1 || sn.ReferencedBytes < -1 {
		return wrap(fmt.Errorf("sizes must be -1 (unknown) or more: %w", errdefs.ErrInvalid))
	}
	return nil
}

// GetSnapshot returns one snapshot (deleted ones too), or ErrNotFound.
func (s *snapshotTable) GetSnapshot(ctx context.Context, id string) (Snapshot, error) {
	return s.getSnapshot(ctx, s.r, id)
}

func (s *snapshotTable) getSnapshot(ctx context.Context, db queryRower, id string) (Snapshot, error) {
	sn, err := scanSnapshot(db.QueryRowContext(ctx, `SELECT `+snapshotCols+` FROM snapshots WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Snapshot{}, fmt.Errorf("snapshot %s: %w", id, errdefs.ErrNotFound)
	}
	if err != nil {
		return Snapshot{}, fmt.Errorf("get snapshot %s: %w", id, dbErr(err))
	}
	return sn, nil
}

// GetSnapshotByName returns the team's live (not deleted) snapshot of that
// name, or ErrNotFound. A turn name (turn-N) held by several of the team's
// sandboxes is ErrConflict: look it up by sandbox with ListSnapshots.
func (s *snapshotTable) GetSnapshotByName(ctx context.Context, team, name string) (Snapshot, error) {
	list, err := s.ListSnapshots(ctx, SnapshotFilter{
		Team: team, Name: name, States: []SnapshotState{SnapshotCreating, SnapshotReady}, Limit: 2,
	})
	if err != nil {
		return Snapshot{}, err
	}
	switch len(list) {
	case 0:
		return Snapshot{}, fmt.Errorf("snapshot %q in team %s: %w", name, team, errdefs.ErrNotFound)
	case 1:
		return list[0], nil
	}
	return Snapshot{}, fmt.Errorf("several sandboxes of team %s have a snapshot %q; name the sandbox too or use the snapshot id: %w",
		team, name, errdefs.ErrConflict)
}

// ListSnapshots returns the snapshots f selects, ordered by creation time
// then id.
func (s *snapshotTable) ListSnapshots(ctx context.Context, f SnapshotFilter) ([]Snapshot, error) {
	var where []string
	var args []any
	for _, c := range []struct {
		col, v string
		check  func(string, string) error
		what   string
	}{
		{"team", f.Team, ids.ValidateName, "team"},
		{"sandbox_id", f.SandboxID, ids.Validate, "sandbox id"},
		{"family", f.Family, ids.Validate, "family"},
		{"name", f.Name, ids.ValidateName, "snapshot name"},
		{"archive_parent", f.ArchiveParent, ids.Validate, "snapshot id"},
	} {
		if c.v == "" {
			continue
		}
		if err := c.check(c.what, c.v); err != nil {
			return nil, err
		}
		where = append(where, c.col+` = ?`)
		args = append(args, c.v)
	}
	if len(f.States) > 0 {
		where = append(where, `state IN (`+placeholders(len(f.States))+`)`)
		for _, st := range f.States {
			args = append(args, string(st))
		}
	}
	if len(f.Kinds) > 0 {
		where = append(where, `kind IN (`+placeholders(len(f.Kinds))+`)`)
		for _, k := range f.Kinds {
			args = append(args, string(k))
		}
	}
	if f.WithStream {
		where = append(where, `archive_path != ''`)
	}
	return runList(ctx, s.conns, listQuery{table: "snapshots", kind: "snapshot", cols: snapshotCols,
		where: where, args: args, after: f.After, limit: f.Limit}, scanSnapshot)
}

// UpdateSnapshotState moves a snapshot to state to if its current state is
// one of from (empty from: any state), a compare-and-set like
// UpdateSandboxState. Moving to deleted sets DeletedAt; moving anywhere else
// clears it.
func (s *snapshotTable) UpdateSnapshotState(ctx context.Context, id string, from []SnapshotState, to SnapshotState) error {
	if !to.Valid() {
		return fmt.Errorf("snapshot %s: unknown state %q: %w", id, to, errdefs.ErrInvalid)
	}
	return s.writeTx(ctx, func(ctx context.Context, tx *stmtTx) error {
		return setSnapshotState(ctx, tx, id, from, to)
	})
}

func setSnapshotState(ctx context.Context, tx *stmtTx, id string, from []SnapshotState, to SnapshotState) error {
	var cur string
	err := tx.QueryRowContext(ctx, `SELECT state FROM snapshots WHERE id = ?`, id).Scan(&cur)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("snapshot %s: %w", id, errdefs.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("snapshot %s: %w", id, dbErr(err))
	}
	if len(from) > 0 && !slices.Contains(from, SnapshotState(cur)) {
		return fmt.Errorf("snapshot %s is %s, so it cannot become %s (only from %v): %w", id, cur, to, from, errdefs.ErrConflict)
	}
	var deleted int64
	if to == SnapshotDeleted {
		deleted = toNanos(time.Now())
	}
	// Undeleting can collide with a snapshot that took the name since:
	// the unique index says so (ErrAlreadyExists).
	_, err = tx.ExecContext(ctx, `UPDATE snapshots SET state = ?, deleted_at = ? WHERE id = ?`, string(to), deleted, id)
	if err != nil {
		return fmt.Errorf("update snapshot %s state: %w", id, dbErr(err))
	}
	return nil
}

// SnapshotTaken records, in one transaction, that a sandbox's snapshot
// was taken: the snapshot becomes ready (from creating), the sandbox's
// head, and edge (its snapshot-of edge) joins the lineage. One commit
// instead of three, on every turn.
func (s *snapshotTable) SnapshotTaken(ctx context.Context, id, sandboxID string, edge LineageEdge) error {
	return s.writeTx(ctx, func(ctx context.Context, tx *stmtTx) error {
		if err := setSnapshotState(ctx, tx, id, []SnapshotState{SnapshotCreating}, SnapshotReady); err != nil {
			return err
		}
		if err := setSandboxHead(ctx, tx, sandboxID, id); err != nil {
			return err
		}
		return insertEdge(ctx, tx, edge)
	})
}

// SetSnapshotSizes records a snapshot's sizes once they are measured (-1 =
// unknown).
func (s *snapshotTable) SetSnapshotSizes(ctx context.Context, id string, exclusive, referenced int64) error {
	if exclusive < -1 || referenced < -1 {
		return fmt.Errorf("snapshot %s: sizes must be -1 (unknown) or more: %w", id, errdefs.ErrInvalid)
	}
	res, err := s.w.ExecContext(ctx, `UPDATE snapshots SET exclusive_bytes = ?, referenced_bytes = ? WHERE id = ?`,
		exclusive, referenced, id)
	return oneRow(res, err, "set sizes of snapshot", id)
}

// SetSnapshotArchive records where a snapshot's archive stream is and the
// snapshot it is a delta against ("", "" forgets them).
func (s *snapshotTable) SetSnapshotArchive(ctx context.Context, id, parent, path string) error {
	if parent != "" {
		if err := ids.Validate("archive parent snapshot id", parent); err != nil {
			return fmt.Errorf("snapshot %s: %w", id, err)
		}
	}
	if (parent == "") != (path == "") {
		return fmt.Errorf("snapshot %s: an archive needs both a parent and a path, or neither: %w", id, errdefs.ErrInvalid)
	}
	res, err := s.w.ExecContext(ctx, `UPDATE snapshots SET archive_parent = ?, archive_path = ? WHERE id = ?`, parent, path, id)
	return oneRow(res, err, "set archive of snapshot", id)
}

// SetSnapshotMemory records the size of the memory image saved with a
// snapshot.
func (s *snapshotTable) SetSnapshotMemory(ctx context.Context, id string, bytes int64) error {
	if bytes < 0 {
		return fmt.Errorf("snapshot %s: memory image size %d: %w", id, bytes, errdefs.ErrInvalid)
	}
	res, err := s.w.ExecContext(ctx, `UPDATE snapshots SET memory_bytes = ? WHERE id = ?`, bytes, id)
	return oneRow(res, err, "set memory image of snapshot", id)
}

// CountArchivedOn counts the snapshots that cannot be rebuilt without
// parentID: those whose stream is a delta against it and that have no volume
// (archived, or deleted but kept as a link of an archive chain).
func (s *snapshotTable) CountArchivedOn(ctx context.Context, parentID string) (int, error) {
	var n int
	err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM snapshots WHERE archive_parent = ? AND archive_path != '' AND state IN (?, ?)`,
		parentID, string(SnapshotArchived), string(SnapshotDeleted)).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count snapshots archived against %s: %w", parentID, dbErr(err))
	}
	return n, nil
}

// ArchiveParents returns the links of an archive chain in one query: the
// snapshot id, then each one's archive parent in turn, as long as the link
// before it has no volume of its own (archived, or deleted but kept as a
// link). The walk stops after a ready or creating snapshot, at a link with
// no stream, at an id that is not recorded, or after limit links. The caller
// decides what the end means; an unknown first id gives an empty list.
func (s *snapshotTable) ArchiveParents(ctx context.Context, id string, limit int) ([]Snapshot, error) {
	return queryAll(ctx, s.r, "archive chain of "+id, scanSnapshot, `WITH RECURSIVE chain(n, id) AS (
			SELECT 0, ?
			UNION ALL
			SELECT chain.n + 1, s.archive_parent FROM snapshots s JOIN chain ON s.id = chain.id
			WHERE s.state IN (?, ?) AND s.archive_parent != '' AND chain.n + 1 < ?
		)
		SELECT `+prefixed("s.", snapshotCols)+` FROM chain JOIN snapshots s ON s.id = chain.id ORDER BY chain.n`,
		id, string(SnapshotArchived), string(SnapshotDeleted), limit)
}

// CountSnapshots counts a sandbox's snapshots in any of states (all of them
// when none are given).
func (s *snapshotTable) CountSnapshots(ctx context.Context, sandboxID string, states ...SnapshotState) (int, error) {
	q := `SELECT count(*) FROM snapshots WHERE sandbox_id = ?`
	args := []any{sandboxID}
	if len(states) > 0 {
		q += ` AND state IN (` + placeholders(len(states)) + `)`
		for _, st := range states {
			args = append(args, string(st))
		}
	}
	var n int
	if err := s.r.QueryRowContext(ctx, q, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count snapshots of sandbox %s: %w", sandboxID, dbErr(err))
	}
	return n, nil
}

func scanSnapshot(sc scanner) (Snapshot, error) {
	var sn Snapshot
	var kind, state, labels string
	var created, deleted int64
	err := sc.Scan(&sn.ID, &sn.Team, &sn.SandboxID, &sn.Family, &sn.Name, &kind, &sn.Turn, &sn.ParentID,
		&sn.Template, &state, &labels, &sn.ExclusiveBytes, &sn.ReferencedBytes, &created, &deleted,
		&sn.ArchiveParent, &sn.ArchivePath, &sn.MemoryBytes)
	if err != nil {
		return Snapshot{}, err
	}
	sn.Kind, sn.State = SnapshotKind(kind), SnapshotState(state)
	sn.CreatedAt, sn.DeletedAt = fromNanos(created), fromNanos(deleted)
	if err := json.Unmarshal([]byte(labels), &sn.Labels); err != nil {
		return Snapshot{}, fmt.Errorf("snapshot %s: stored labels are corrupt: %w", sn.ID, err)
	}
	return sn, nil
}

// prefixed qualifies each column of a comma-separated list with prefix
// ("s." makes "id, team" into "s.id, s.team").
func prefixed(prefix, cols string) string {
	parts := strings.Split(cols, ",")
	for i, c := range parts {
		parts[i] = prefix + strings.TrimSpace(c)
	}
	return strings.Join(parts, ", ")
}

// TurnWindow is the part of a sandbox's turn history that archiving plans
// from: its ready turns, each with the usable turn after it, instead of
// every turn it ever took. A long history is mostly archived turns, and
// reading them all on every archiving pass made each turn's archiving cost
// grow with the history (3 ms of CPU a pass at 1,000 turns).
type TurnWindow struct {
	// Turns are the ready turns and, after each, the next usable (ready or
	// archived) turn, by turn number.
	Turns []Snapshot
	// OldThrough is the number of the newest usable turn that is not among
	// the newest keep: it and the turns before it are old. 0 when the
	// sandbox has no more than keep usable turns.
	OldThrough int
	// Newest is when the newest usable turn was taken (zero: there is none).
	Newest time.Time
}

// TurnWindow reads sandboxID's turn window for keeping its newest keep
// turns, in one read transaction.
func (s *snapshotTable) TurnWindow(ctx context.Context, sandboxID string, keep int) (TurnWindow, error) {
	if err := ids.Validate("sandbox id", sandboxID); err != nil {
		return TurnWindow{}, err
	}
	var w TurnWindow
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return w, fmt.Errorf("turn window of %s: %w", sandboxID, dbErr(err))
	}
	defer tx.Rollback()
	// "state != 'deleted'" lets SQLite use the partial index on
	// (sandbox_id, turn) that holds a sandbox's live turns.
	const usable = `sandbox_id = ? AND kind = 'turn' AND state != 'deleted' AND state IN ('ready', 'archived')`
	// The newest keep+1 usable turns: the first is the newest, the last (if
	// there are that many) the newest old one.
	type head struct {
		turn    int
		created int64
	}
	heads, err := queryAll(ctx, tx, "newest turns of "+sandboxID, func(sc scanner) (head, error) {
		var h head
		return h, sc.Scan(&h.turn, &h.created)
	}, `SELECT turn, created_at FROM snapshots WHERE `+usable+` ORDER BY turn DESC LIMIT ?`, sandboxID, max(keep, 0)+1)
	if err != nil || len(heads) == 0 {
		return w, err
	}
	w.Newest = fromNanos(heads[0].created)
	if keep >= 0 && len(heads) == keep+1 {
		w.OldThrough = heads[keep].turn
	}
	// The ready turns (an index of their own), then the archived turn
	// right after each, if any.
	const ready = `sandbox_id = ? AND kind = 'turn' AND state = 'ready'`
	w.Turns, err = queryAll(ctx, tx, "turn window of "+sandboxID, scanSnapshot, `SELECT `+snapshotCols+` FROM snapshots WHERE `+ready+`
		UNION ALL
		SELECT `+snapshotCols+` FROM snapshots WHERE `+usable+` AND state = 'archived' AND turn IN (
			SELECT (SELECT min(n.turn) FROM snapshots n WHERE n.sandbox_id = r.sandbox_id AND n.kind = 'turn'
				AND n.state != 'deleted' AND n.state IN ('ready', 'archived') AND n.turn > r.turn)
			FROM snapshots r WHERE r.`+ready+`)
		ORDER BY turn`, sandboxID, sandboxID, sandboxID)
	return w, err
}

// SnapshotTotals counts the snapshots held (ready or archived, every team)
// and sums the bytes known to be theirs alone, for a node's summary of
// what it holds (node mode's WarrenNode status), without reading every
// row into memory.
func (s *snapshotTable) SnapshotTotals(ctx context.Context) (count, bytes int64, err error) {
	err = s.r.QueryRowContext(ctx, `SELECT count(*), COALESCE(SUM(MAX(exclusive_bytes, 0)), 0) FROM snapshots WHERE state IN (?, ?)`,
		string(SnapshotReady), string(SnapshotArchived)).Scan(&count, &bytes)
	if err != nil {
		return 0, 0, fmt.Errorf("count snapshots: %w", dbErr(err))
	}
	return count, bytes, nil
}
