package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
)

// Volume is the record of one shared volume (E2B's Volume): a tree of its
// own that sandboxes mount by name. Its content lives in the storage pool.
type Volume struct {
	ID, Team, Name string
	// Token authorises the volume content API (E2B sends it as a bearer
	// token); it is handed out with the volume, so it is kept as it is.
	Token     string
	SizeBytes int64 // quota (0 = none)
	CreatedAt time.Time
}

// VolumeMount is one volume mounted into a sandbox at Path. Name is filled
// when read (from the volume's record).
type VolumeMount struct {
	VolumeID, Name, Path string
}

// liveStates are the states of a sandbox that may run again: one of them
// mounting a volume keeps the volume from being deleted.
var liveStates = []SandboxState{StateCreating, StateRunning, StatePaused, StateHibernated, StateStopped}

const volumeCols = `id, team, name, token, size_bytes, created_at`

// CreateVolume records a new volume. A name the team already uses is
// ErrAlreadyExists.
func (s *volumeTable) CreateVolume(ctx context.Context, v Volume) error {
	if v.CreatedAt.IsZero() {
		v.CreatedAt = time.Now()
	}
	_, err := s.w.ExecContext(ctx, `INSERT INTO volumes (`+volumeCols+`) VALUES (?, ?, ?, ?, ?, ?)`,
		v.ID, v.Team, v.Name, v.Token, v.SizeBytes, toNanos(v.CreatedAt))
	if err != nil {
		if errdefs.IsAlreadyExists(dbErr(err)) {
			return fmt.Errorf("a volume named %q already exists: %w", v.Name, errdefs.ErrAlreadyExists)
		}
		return fmt.Errorf("create volume %s: %w", v.Name, dbErr(err))
	}
	return nil
}

// GetVolume returns one volume by id, or ErrNotFound.
func (s *volumeTable) GetVolume(ctx context.Context, id string) (Volume, error) {
	return s.oneVolume(ctx, `id = ?`, id)
}

// VolumeByName returns a team's volume by name, or ErrNotFound.
func (s *volumeTable) VolumeByName(ctx context.Context, team, name string) (Volume, error) {
	return s.oneVolume(ctx, `team = ? AND name = ?`, team, name)
}

func (s *volumeTable) oneVolume(ctx context.Context, where string, args ...any) (Volume, error) {
	v, err := scanVolume(s.r.QueryRowContext(ctx, `SELECT `+volumeCols+` FROM volumes WHERE `+where, args...))
	if errors.Is(err, sql.ErrNoRows) {
		return Volume{}, fmt.Errorf("volume %s: %w", args[len(args)-1], errdefs.ErrNotFound)
	}
	if err != nil {
		return Volume{}, fmt.Errorf("get volume %s: %w", args[len(args)-1], dbErr(err))
	}
	return v, nil
}

// ListVolumes returns a team's volumes ("" = every team's), by name.
func (s *volumeTable) ListVolumes(ctx context.Context, team string) ([]Volume, error) {
	q, args := `SELECT `+volumeCols+` FROM volumes`, []any{}
	if team != "" {
		q, args = q+` WHERE team = ?`, append(args, team)
	}
	rows, err := s.r.QueryContext(ctx, q+` ORDER BY name`, args...)
	if err != nil {
		return nil, fmt.Errorf("list volumes: %w", dbErr(err))
	}
	defer rows.Close()
	out := []Volume{}
	for rows.Next() {
		v, err := scanVolume(rows)
		if err != nil {
			return nil, fmt.Errorf("list volumes: %w", dbErr(err))
		}
		out = append(out, v)
	}
	return out, dbErr(rows.Err())
}

// DeleteVolume forgets a volume unless a sandbox that may run again mounts
// it (ErrConflict, naming them); the mounts of sandboxes that are gone go
// with it. The check and the delete are one transaction, so no create can
// slip a mount in between.
func (s *volumeTable) DeleteVolume(ctx context.Context, id string) error {
	return s.writeTx(ctx, func(ctx context.Context, tx *stmtTx) error {
		rows, err := tx.QueryContext(ctx, `SELECT m.sandbox_id FROM sandbox_volume_mounts m JOIN sandboxes s ON s.id = m.sandbox_id
			WHERE m.volume_id = ? AND s.state IN (`+placeholders(len(liveStates))+`) ORDER BY m.sandbox_id`,
			append([]any{id}, statesArgs(liveStates)...)...)
		if err != nil {
			return fmt.Errorf("delete volume %s: %w", id, dbErr(err))
		}
		var users []string
		for rows.Next() {
			var sb string
			if err := rows.Scan(&sb); err != nil {
				rows.Close()
				return fmt.Errorf("delete volume %s: %w", id, dbErr(err))
			}
			users = append(users, sb)
		}
		rows.Close()
		if len(users) > 0 {
			return fmt.Errorf("volume %s is mounted by sandbox %s; kill it first: %w", id, strings.Join(users, ", "), errdefs.ErrConflict)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM sandbox_volume_mounts WHERE volume_id = ?`, id); err != nil {
			return fmt.Errorf("delete mounts of volume %s: %w", id, dbErr(err))
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM volumes WHERE id = ?`, id)
		return oneRow(res, err, "delete volume", id)
	})
}

// SandboxVolumeMounts returns the volumes a sandbox mounts, by path.
func (s *volumeTable) SandboxVolumeMounts(ctx context.Context, sandboxID string) ([]VolumeMount, error) {
	return sandboxMounts(ctx, s.r, sandboxID)
}

func sandboxMounts(ctx context.Context, q querier, sandboxID string) ([]VolumeMount, error) {
	rows, err := q.QueryContext(ctx, `SELECT m.volume_id, v.name, m.path FROM sandbox_volume_mounts m JOIN volumes v ON v.id = m.volume_id
		WHERE m.sandbox_id = ? ORDER BY m.path`, sandboxID)
	if err != nil {
		return nil, fmt.Errorf("volume mounts of sandbox %s: %w", sandboxID, dbErr(err))
	}
	defer rows.Close()
	var out []VolumeMount
	for rows.Next() {
		var m VolumeMount
		if err := rows.Scan(&m.VolumeID, &m.Name, &m.Path); err != nil {
			return nil, fmt.Errorf("volume mounts of sandbox %s: %w", sandboxID, dbErr(err))
		}
		out = append(out, m)
	}
	return out, dbErr(rows.Err())
}

// insertMounts records a new sandbox's volume mounts (with its record).
func insertMounts(ctx context.Context, ex execer, sandboxID string, mounts []VolumeMount) error {
	for _, m := range mounts {
		// Only a volume that still exists: one deleted since the create
		// looked it up is ErrNotFound, not a dangling mount.
		res, err := ex.ExecContext(ctx, `INSERT INTO sandbox_volume_mounts (sandbox_id, volume_id, path)
			SELECT ?, id, ? FROM volumes WHERE id = ?`, sandboxID, m.Path, m.VolumeID)
		if err := oneRow(res, err, "mount volume", m.VolumeID); err != nil {
			return fmt.Errorf("sandbox %s: %w", sandboxID, err)
		}
	}
	return nil
}

func statesArgs(states []SandboxState) []any {
	out := make([]any, len(states))
	for i, st := range states {
		out[i] = string(st)
	}
	return out
}

func scanVolume(sc scanner) (Volume, error) {
	var v Volume
	var created int64
	if err := sc.Scan(&v.ID, &v.Team, &v.Name, &v.Token, &v.SizeBytes, &created); err != nil {
		return Volume{}, err
	}
	v.CreatedAt = fromNanos(created)
	return v, nil
}
