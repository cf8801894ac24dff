package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/warrenhq/warren/internal/errdefs"
)

// Secret is a team's secret as stored, without its value: the sealed value
// of each version is in secret_versions and leaves the store only through
// SealedSecret, for the egress proxy.
type Secret struct {
	ID           string
	Team         string
	Name         string
	Version      int
	Metadata     map[string]string
	AllowedHosts []string
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// Cursor pages a team's secrets by name.
func (s Secret) Cursor() string { return s.Name }

// SealFunc seals a secret's value for version of secret id (the id and
// version bind the ciphertext to its row).
type SealFunc func(id string, version int) ([]byte, error)

// SecretChange is what a new version changes besides the value; nil keeps
// the stored field.
type SecretChange struct {
	Metadata     map[string]string
	AllowedHosts []string
	// HasMetadata and HasAllowedHosts tell "replace with empty" from "keep".
	HasMetadata, HasAllowedHosts bool
}

// CreateSecret stores secret rec (ID, Team, Name, Metadata, AllowedHosts)
// as version 1 with the value seal returns.
func (s *secretTable) CreateSecret(ctx context.Context, rec Secret, seal SealFunc) (Secret, error) {
	sealed, err := seal(rec.ID, 1)
	if err != nil {
		return Secret{}, err
	}
	now := time.Now().UTC()
	rec.Version, rec.CreatedAt, rec.UpdatedAt = 1, now, now
	meta, hosts, err := encodeSecretFields(rec.Metadata, rec.AllowedHosts)
	if err != nil {
		return Secret{}, err
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return Secret{}, dbErr(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO secrets (id, team, name, current_version, metadata, allowed_hosts, created_at, updated_at)
		VALUES (?, ?, ?, 1, ?, ?, ?, ?)`, rec.ID, rec.Team, rec.Name, meta, hosts, toNanos(now), toNanos(now)); err != nil {
		err = dbErr(err)
		if errors.Is(err, errdefs.ErrAlreadyExists) {
			return Secret{}, fmt.Errorf("secret %q exists already (POST /secrets/%s stores a new version): %w", rec.Name, rec.Name, errdefs.ErrAlreadyExists)
		}
		return Secret{}, fmt.Errorf("create secret %q: %w", rec.Name, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO secret_versions (secret_id, version, sealed, created_at) VALUES (?, 1, ?, ?)`,
		rec.ID, sealed, toNanos(now)); err != nil {
		return Secret{}, fmt.Errorf("create secret %q: %w", rec.Name, dbErr(err))
	}
	if err := tx.Commit(); err != nil {
		return Secret{}, dbErr(err)
	}
	return rec, nil
}

// AddSecretVersion stores a new version of a team's secret (by id or name)
// and makes it current; older versions are deleted (nothing reads them, and
// a value replaced should not linger).
func (s *secretTable) AddSecretVersion(ctx context.Context, team, ref string, ch SecretChange, seal SealFunc) (Secret, error) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return Secret{}, dbErr(err)
	}
	defer tx.Rollback()
	rec, err := getSecret(ctx, tx, team, ref)
	if err != nil {
		return Secret{}, err
	}
	rec.Version++
	rec.UpdatedAt = time.Now().UTC()
	if ch.HasMetadata {
		rec.Metadata = ch.Metadata
	}
	if ch.HasAllowedHosts {
		rec.AllowedHosts = ch.AllowedHosts
	}
	sealed, err := seal(rec.ID, rec.Version)
	if err != nil {
		return Secret{}, err
	}
	meta, hosts, err := encodeSecretFields(rec.Metadata, rec.AllowedHosts)
	if err != nil {
		return Secret{}, err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE secrets SET current_version = ?, metadata = ?, allowed_hosts = ?, updated_at = ? WHERE id = ?`,
		rec.Version, meta, hosts, toNanos(rec.UpdatedAt), rec.ID); err != nil {
		return Secret{}, fmt.Errorf("update secret %q: %w", rec.Name, dbErr(err))
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM secret_versions WHERE secret_id = ?`, rec.ID); err != nil {
		return Secret{}, fmt.Errorf("update secret %q: %w", rec.Name, dbErr(err))
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO secret_versions (secret_id, version, sealed, created_at) VALUES (?, ?, ?, ?)`,
		rec.ID, rec.Version, sealed, toNanos(rec.UpdatedAt)); err != nil {
		return Secret{}, fmt.Errorf("update secret %q: %w", rec.Name, dbErr(err))
	}
	if err := tx.Commit(); err != nil {
		return Secret{}, dbErr(err)
	}
	return rec, nil
}

// GetSecret returns a team's secret by id or name.
func (s *secretTable) GetSecret(ctx context.Context, team, ref string) (Secret, error) {
	return getSecret(ctx, s.r, team, ref)
}

// SealedSecret returns a team's secret by name with its current sealed
// value.
func (s *secretTable) SealedSecret(ctx context.Context, team, name string) (Secret, []byte, error) {
	rec, err := getSecret(ctx, s.r, team, name)
	if err != nil {
		return Secret{}, nil, err
	}
	var sealed []byte
	err = s.r.QueryRowContext(ctx, `SELECT sealed FROM secret_versions WHERE secret_id = ? AND version = ?`, rec.ID, rec.Version).Scan(&sealed)
	if errors.Is(err, sql.ErrNoRows) {
		// Deleted or replaced between the two reads.
		return Secret{}, nil, fmt.Errorf("secret %q: %w", name, errdefs.ErrNotFound)
	}
	if err != nil {
		return Secret{}, nil, fmt.Errorf("read secret %q: %w", name, dbErr(err))
	}
	return rec, sealed, nil
}

// ListSecrets returns a team's secrets by name, after the name after ("" =
// from the start), at most limit.
func (s *secretTable) ListSecrets(ctx context.Context, team, after string, limit int) ([]Secret, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+secretCols+` FROM secrets WHERE team = ? AND name > ? ORDER BY name LIMIT ?`, team, after, limit)
	if err != nil {
		return nil, fmt.Errorf("list secrets: %w", dbErr(err))
	}
	defer rows.Close()
	var out []Secret
	for rows.Next() {
		rec, err := scanSecret(rows)
		if err != nil {
			return nil, fmt.Errorf("list secrets: %w", dbErr(err))
		}
		out = append(out, rec)
	}
	return out, rows.Err()
}

// DeleteSecret removes a team's secret (by id or name) and every version.
func (s *secretTable) DeleteSecret(ctx context.Context, team, ref string) (Secret, error) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return Secret{}, dbErr(err)
	}
	defer tx.Rollback()
	rec, err := getSecret(ctx, tx, team, ref)
	if err != nil {
		return Secret{}, err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM secret_versions WHERE secret_id = ?`, rec.ID); err != nil {
		return Secret{}, fmt.Errorf("delete secret %q: %w", rec.Name, dbErr(err))
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM secrets WHERE id = ?`, rec.ID); err != nil {
		return Secret{}, fmt.Errorf("delete secret %q: %w", rec.Name, dbErr(err))
	}
	return rec, dbErr(tx.Commit())
}

const secretCols = "id, team, name, current_version, metadata, allowed_hosts, created_at, updated_at"

type queryRower interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// getSecret finds a team's secret by id (sec_…) or by name (names are
// lower case; ids never are looked up as names).
func getSecret(ctx context.Context, q queryRower, team, ref string) (Secret, error) {
	col := "name"
	if strings.HasPrefix(ref, "sec_") {
		col = "id"
	} else {
		ref = strings.ToLower(ref)
	}
	rec, err := scanSecret(q.QueryRowContext(ctx, `SELECT `+secretCols+` FROM secrets WHERE team = ? AND `+col+` = ?`, team, ref))
	if errors.Is(err, sql.ErrNoRows) {
		return Secret{}, fmt.Errorf("secret %q: %w", ref, errdefs.ErrNotFound)
	}
	if err != nil {
		return Secret{}, fmt.Errorf("read secret %q: %w", ref, dbErr(err))
	}
	return rec, nil
}

func scanSecret(sc scanner) (Secret, error) {
	var rec Secret
	var meta, hosts string
	var created, updated int64
	if err := sc.Scan(&rec.ID, &rec.Team, &rec.Name, &rec.Version, &meta, &hosts, &created, &updated); err != nil {
		return Secret{}, err
	}
	rec.CreatedAt, rec.UpdatedAt = fromNanos(created), fromNanos(updated)
	if err := json.Unmarshal([]byte(meta), &rec.Metadata); err != nil {
		return Secret{}, fmt.Errorf("secret %s: metadata: %w", rec.ID, err)
	}
	if err := json.Unmarshal([]byte(hosts), &rec.AllowedHosts); err != nil {
		return Secret{}, fmt.Errorf("secret %s: allowed hosts: %w", rec.ID, err)
	}
	return rec, nil
}

func encodeSecretFields(meta map[string]string, hosts []string) (string, string, error) {
	if meta == nil {
		meta = map[string]string{}
	}
	if hosts == nil {
		hosts = []string{}
	}
	m, err := json.Marshal(meta)
	if err != nil {
		return "", "", fmt.Errorf("encode secret metadata: %w", errdefs.ErrInvalid)
	}
	h, err := json.Marshal(hosts)
	if err != nil {
		return "", "", fmt.Errorf("encode secret hosts: %w", errdefs.ErrInvalid)
	}
	return string(m), string(h), nil
}
