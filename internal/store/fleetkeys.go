package store

import (
	"context"
	"encoding/hex"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/warrenhq/warren/internal/errdefs"
	"github.com/warrenhq/warren/internal/ids"
)

// sourceFleet marks a key synced from the fleet's key Secrets.
const sourceFleet = "fleet"

// FleetKey is an API key the fleet holds elsewhere (a Kubernetes Secret):
// its id, owner, label and hash, never the key.
type FleetKey struct {
	ID, Team, Name, Prefix string
	// Hash is HashKey of the key.
	Hash string
}

// Validate checks what a Secret, which anyone with write access to the
// namespace can make, says about a key.
func (k FleetKey) Validate() error {
	if err := ids.ValidateName("key id", k.ID); err != nil {
		return err
	}
	if err := ids.ValidateName("team", k.Team); err != nil {
		return err
	}
	if len(k.Name) > maxNameLen || !utf8.ValidString(k.Name) || len(k.Prefix) > displayLen || !utf8.ValidString(k.Prefix) {
		return fmt.Errorf("key %s: name or prefix too long or not UTF-8: %w", k.ID, errdefs.ErrInvalid)
	}
	if b, err := hex.DecodeString(k.Hash); err != nil || len(b) != 32 {
		return fmt.Errorf("key %s: hash must be 64 hex digits (SHA-256): %w", k.ID, errdefs.ErrInvalid)
	}
	return nil
}

// SyncFleetKeys makes the node's keys from the fleet exactly keys: each is
// added or updated (and un-revoked) by id, and every earlier fleet key not
// among them is revoked. Keys made on this node are left alone. A key that
// is malformed or clashes with a local key (same id or hash) is skipped,
// with why in skipped; err is a failure of the whole sync.
func (s *keyTable) SyncFleetKeys(ctx context.Context, keys []FleetKey) (skipped []error, err error) {
	now := toNanos(time.Now().UTC())
	err = s.writeTx(ctx, func(ctx context.Context, tx *stmtTx) error {
		had, err := fleetKeyIDs(ctx, tx)
		if err != nil {
			return err
		}
		for _, k := range keys {
			if err := upsertFleetKey(ctx, tx, k, now); err != nil {
				skipped = append(skipped, err)
				continue
			}
			delete(had, k.ID)
		}
		for id := range had {
			if _, err := tx.ExecContext(ctx, `UPDATE api_keys SET revoked = 1 WHERE id = ? AND source = ?`, id, sourceFleet); err != nil {
				return fmt.Errorf("revoke fleet key %s, whose Secret is gone: %w", id, dbErr(err))
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return skipped, nil
}

// fleetKeyIDs returns the ids of the fleet keys not revoked.
func fleetKeyIDs(ctx context.Context, tx *stmtTx) (map[string]bool, error) {
	rows, err := tx.QueryContext(ctx, `SELECT id FROM api_keys WHERE source = ? AND revoked = 0`, sourceFleet)
	if err != nil {
		return nil, fmt.Errorf("list fleet keys: %w", dbErr(err))
	}
	defer rows.Close()
	ids := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("list fleet keys: %w", dbErr(err))
		}
		ids[id] = true
	}
	return ids, dbErr(rows.Err())
}

func upsertFleetKey(ctx context.Context, tx *stmtTx, k FleetKey, now int64) error {
	if err := k.Validate(); err != nil {
		return err
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO api_keys (id, team, name, prefix, hash, created_at, source)
		VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET team = excluded.team, name = excluded.name, prefix = excluded.prefix,
			hash = excluded.hash, revoked = 0
		WHERE api_keys.source = excluded.source`,
		k.ID, k.Team, k.Name, k.Prefix, k.Hash, now, sourceFleet)
	if err != nil {
		return fmt.Errorf("fleet key %s: %w", k.ID, dbErr(err))
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("fleet key %s: a key made on this node has that id: %w", k.ID, errdefs.ErrAlreadyExists)
	}
	return nil
}
